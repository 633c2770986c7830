package sysmon_test

import (
	"fmt"

	"github.com/pacer-dev/pacer/shaper/sysmon"
)

// A data path's worker reports each wake-up; the Keeper keeps the
// runtime's monitor awake while they come and lets it sleep once they stop.
func ExampleKeeper() {
	k, err := sysmon.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer k.Close()
	for range 3 { // a worker's loop: wait for packets, then
		k.Busy()
		// ... forward them.
	}
	fmt.Println("awake:", k.Awake())
	// Output: awake: true
}
