//go:build !linux

// Command bench measures pacer against its references; it needs Linux
// (TUN devices, network namespaces, tc).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "bench: needs Linux (TUN devices, network namespaces, tc)")
	os.Exit(2)
}
