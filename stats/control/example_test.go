package control_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/control"
)

// ExampleClient reads a class's rates and changes its rate, as pacerctl
// does. A stand-in for pacerd answers on a socket in a temporary directory.
func ExampleClient() {
	dir, err := os.MkdirTemp("", "pacer-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "pacerd.sock")
	ln, err := control.Listen(socket)
	if err != nil {
		fmt.Println(err)
		return
	}
	bulk := control.Class{
		ClassStats: stats.ClassStats{Direction: "egress", Class: "bulk", Mode: "shape", RateBytesPerSecond: 1_250_000},
		Config:     control.ClassConfig{Name: "bulk", Rate: "10mbit", Burst: "12500b"},
		Achieved:   stats.Rate{SentBytesPerSecond: 1_249_100, WindowSeconds: 1},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		control.WriteJSON(w, http.StatusOK, control.Status{Classes: []control.Class{bulk}})
	})
	mux.HandleFunc("PATCH /v1/classes/egress/bulk", func(w http.ResponseWriter, r *http.Request) {
		bulk.Config.Rate, bulk.RateBytesPerSecond = "20mbit", 2_500_000
		control.WriteJSON(w, http.StatusOK, bulk)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()

	ctx := context.Background()
	c := control.NewClient(socket, 5*time.Second)
	st, err := c.Status(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, cl := range st.Classes {
		fmt.Printf("%s %s: configured %s, achieved %.0f B/s\n", cl.Direction, cl.Class, cl.Config.Rate, cl.Achieved.SentBytesPerSecond)
	}
	cl, err := c.Set(ctx, "egress", "bulk", control.SetRequest{Rate: "20mbit"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("now %s (%d B/s)\n", cl.Config.Rate, cl.RateBytesPerSecond)

	_, err = control.NewClient(filepath.Join(dir, "other.sock"), time.Second).Status(ctx)
	fmt.Println(err != nil, errors.Is(err, control.ErrNotRunning))
	// Output:
	// egress bulk: configured 10mbit, achieved 1249100 B/s
	// now 20mbit (2500000 B/s)
	// true true
}
