package fq

// Flows set aside while their packets' gates (per-key limits) hold them:
// the scheduler wakes them in order of when they may go.

// throttle is a flow set aside until its Gate opens.
type throttle struct {
	until int64
	fi    int32
}

// throttle sets flow fi, just popped off its list, aside until until.
func (s *Sched) throttle(fi int32, until int64) {
	s.flows[fi].list = listThrottled
	s.active--
	h := append(s.throttled, throttle{until, fi})
	for i := len(h) - 1; i > 0; {
		up := (i - 1) / 2
		if h[up].until <= h[i].until {
			break
		}
		h[up], h[i] = h[i], h[up]
		i = up
	}
	s.throttled = h
	s.weightAt = -1 << 62
}

// unthrottle puts the flows whose throttle time has come back at the end
// of the old list.
func (s *Sched) unthrottle(now int64) {
	for len(s.throttled) > 0 && s.throttled[0].until <= now {
		fi := s.popThrottled()
		s.flows[fi].list = listOld
		s.push(&s.oldList, fi)
		s.active++
		s.weightAt = -1 << 62
	}
}

func (s *Sched) popThrottled() int32 {
	h := s.throttled
	fi := h[0].fi
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].until < h[m].until {
			m = l
		}
		if r < len(h) && h[r].until < h[m].until {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	s.throttled = h
	return fi
}

// NextWake returns when the first throttled flow may go again (clock ns),
// or 0 if none is throttled. A Sched that holds packets but returns none
// from Dequeue has all its flows throttled: ask again then.
func (s *Sched) NextWake() int64 {
	if len(s.throttled) == 0 {
		return 0
	}
	return s.throttled[0].until
}

// Throttled returns the number of flows set aside by their Gate.
func (s *Sched) Throttled() int { return len(s.throttled) }
