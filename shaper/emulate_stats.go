package shaper

// RateNow returns the class's rate when its ClassInfo was taken, in bytes
// per second: the scheduled rate for a class with a trace or rates, else
// its configured rate.
func (ci ClassInfo) RateNow() uint64 {
	if st := ci.state.Load(); st != nil && st.rate != nil {
		return st.rate.RateAt(ci.now)
	}
	return ci.Config().Rate
}
