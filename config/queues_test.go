package config_test

import (
	"testing"

	"github.com/pacer-dev/pacer/config"
)

func TestAutoQueues(t *testing.T) {
	const link = "link:\n  inner: {name: pace-in}\n  outer: {name: pace-out, netns: wan}\n"
	tests := []struct {
		name, yaml string
		want       int
	}{
		{"both shaped low", "egress: {rate: 20mbit}\ningress: {rate: 100mbit}\n", 1},
		{"one unshaped", "egress: {rate: 20mbit}\n", 0},
		{"classes, no direction rate", "egress:\n  classes: [{name: a, rate: 10mbit}]\ningress: {rate: 10mbit}\n", 0},
		{"at 1 Gbit/s", "egress: {rate: 1gbit}\ningress: {rate: 100mbit}\n", 0},
		{"just below", "egress: {rate: 999mbit}\ningress: {rate: 999mbit}\n", 1},
		{"autorate's max counts", "egress:\n  rate: auto\n  autorate: {min: 5mbit, base: 20mbit, max: 2gbit, reflectors: [198.18.2.2]}\ningress: {rate: 10mbit}\n", 0},
		{"autorate below", "egress:\n  rate: auto\n  autorate: {min: 5mbit, base: 20mbit, max: 80mbit, reflectors: [198.18.2.2]}\ningress: {rate: 10mbit}\n", 1},
		{"rate schedule", "egress:\n  rate: 10mbit\n  rates: [{at: 0s, rate: 12mbit}, {at: 1s, rate: 3mbit}, {at: 2s}]\ningress: {rate: 10mbit}\n", 0},
		{"set by hand", "egress: {rate: 20mbit}\n", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := link + tt.yaml
			if tt.name == "set by hand" {
				y = "link:\n  queues: 3\n  inner: {name: pace-in}\n  outer: {name: pace-out, netns: wan}\n" + tt.yaml
			}
			c, err := config.Parse("q.yaml", []byte(y))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.AutoQueues(); got != tt.want {
				t.Errorf("AutoQueues() = %d, want %d", got, tt.want)
			}
		})
	}
}
