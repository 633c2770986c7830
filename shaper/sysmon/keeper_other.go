//go:build !linux

package sysmon

// A Keeper does nothing outside Linux: the data paths it serves are
// Linux's. Its methods are safe on the nil Keeper New returns.
type Keeper struct{}

// New returns a nil Keeper.
func New() (*Keeper, error) { return nil, nil }

// Busy does nothing.
func (k *Keeper) Busy() {}

// Awake reports false.
func (k *Keeper) Awake() bool { return false }

// Counts returns zeros.
func (k *Keeper) Counts() (ticks, parks, stepOuts uint64) { return 0, 0, 0 }

// Close does nothing.
func (k *Keeper) Close() error { return nil }
