package shaper

// RateNow returns the class's rate at this moment in bytes per second: the
// scheduled rate for a class with a trace or rates, else its configured
// rate.
//
// STUB (link emulation): returns the configured rate until the data path
// provides the schedule's current rate; the lead replaces this file.
func (c *Class) RateNow() uint64 { return c.Config().Rate }
