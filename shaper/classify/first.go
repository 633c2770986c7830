package classify

// A classifier whose classes use one port or address field keeps each
// value's answer, the first class that matches (Classifier.first).

// oneField reports whether the classes use exactly one field, a port or
// an address.
func (c *Classifier) oneField() bool {
	n := 0
	for _, use := range []bool{c.useProto, c.useDSCP, c.sport.use, c.dport.use, c.src.use, c.dst.use} {
		if use {
			n++
		}
	}
	return n == 1 && !c.useProto && !c.useDSCP
}

// buildFirst builds the one field's table of answers (first). anyOf are
// each field's classes that do not use it.
func (c *Classifier) buildFirst(sportAny, dportAny, srcAny, dstAny bitset, sports, dports, src4, src6, dst4, dst6 []interval) {
	c.first = true
	switch {
	case c.sport.use:
		starts, firsts := sweepFirst(sportAny.first(), sports, u128{0, 0xffff})
		c.sport.starts, c.sport.sets = narrow16(starts), firsts
	case c.dport.use:
		starts, firsts := sweepFirst(dportAny.first(), dports, u128{0, 0xffff})
		c.dport.starts, c.dport.sets = narrow16(starts), firsts
	default:
		t, anyOf, ivs4, ivs6 := &c.src, srcAny, src4, src6
		if c.dst.use {
			t, anyOf, ivs4, ivs6 = &c.dst, dstAny, dst4, dst6
		}
		starts, firsts := sweepFirst(anyOf.first(), ivs4, u128{0, 0xffffffff})
		t.starts4, t.sets4 = narrow32(starts), firsts
		t.starts6, t.sets6 = sweepFirst(anyOf.first(), ivs6, u128{^uint64(0), ^uint64(0)})
		t.invalid = uint32(anyOf.first() + 1)
	}
}

// sweepFirst cuts [0, top] into elementary intervals at every interval's
// ends and returns each one's start and answer: the lowest of anyMin (-1:
// none) and the classes with an interval covering it, plus one (0: none),
// merging neighbours with equal answers. It takes O(n log n) time for n
// intervals.
func sweepFirst(anyMin int, ivs []interval, top u128) ([]u128, []uint32) {
	var active minHeap // classes covering the sweep's point; ended ones leave lazily
	covering := map[int]bool{}
	enter := func(class int) {
		covering[class] = true
		active.push(class)
	}
	leave := func(class int) { delete(covering, class) }
	answer := func() uint32 {
		for len(active) > 0 && !covering[active[0]] {
			active.pop()
		}
		best := anyMin
		if len(active) > 0 && (best < 0 || active[0] < best) {
			best = active[0]
		}
		return uint32(best + 1)
	}
	return sweepIntervals(ivs, top, enter, leave, answer)
}

// minHeap is a binary min-heap of class indexes.
type minHeap []int

func (h *minHeap) push(x int) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p] <= s[i] {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *minHeap) pop() {
	s := *h
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && s[l] < s[m] {
			m = l
		}
		if r := l + 1; r < n && s[r] < s[m] {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
}
