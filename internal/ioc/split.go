package ioc

// A pool's limit holds per host across all the uplinks of its switch: when
// its traffic leaves by several uplinks, their ceilings for the pool add up
// to the limit. The split follows demand, so that the limit stays
// work-conserving: an uplink whose share is used up asks for more, one
// that leaves part of its share idle gives it back.

// SplitFloor is the fraction of the limit every uplink keeps, so that
// traffic that starts on an idle uplink is seen (and grows its share).
const SplitFloor = 0.01

// EqualSplit divides a limit evenly over n uplinks, to the bit, summing
// exactly to the limit.
func EqualSplit(limit uint64, n int) []uint64 {
	out := make([]uint64, n)
	if n == 0 {
		return out
	}
	for i := range out {
		out[i] = limit / uint64(n)
	}
	out[n-1] += limit - limit/uint64(n)*uint64(n)
	return out
}

// SplitLimit returns the next ceilings for a limited pool on its uplinks,
// given the current ceilings and the rates the pool made under them (bit/s).
// It water-fills: an uplink running below 90% of its ceiling is not held
// back and keeps what it uses plus a quarter (at least the floor); the
// uplinks that are held back share the rest evenly; if none is, the rest
// is spread evenly as headroom. The result is nil when no ceiling would
// move by more than 2% of the limit: small corrections only churn HTB.
func SplitLimit(limit uint64, ceils []uint64, rates []float64) []uint64 {
	n := len(ceils)
	if n < 2 || len(rates) != n || limit == 0 {
		return nil
	}
	floor := float64(limit) * SplitFloor
	next := make([]float64, n)
	var held []int
	rest := float64(limit)
	for i := range ceils {
		if rates[i] >= 0.9*float64(ceils[i]) {
			held = append(held, i)
			continue
		}
		next[i] = max(1.25*rates[i], floor)
		rest -= next[i]
	}
	if len(held) == 0 {
		for i := range next {
			held = append(held, i)
		}
	}
	each := max(rest, 0) / float64(len(held))
	for _, i := range held {
		next[i] += max(each, floor-next[i])
	}
	return settle(limit, ceils, next)
}

// settle scales the new ceilings to sum to the limit exactly, and returns
// nil when none moves by more than 2% of it.
func settle(limit uint64, ceils []uint64, next []float64) []uint64 {
	var total float64
	for _, x := range next {
		total += x
	}
	out := make([]uint64, len(next))
	var sum uint64
	moved := false
	for i, x := range next {
		out[i] = uint64(float64(limit) * x / total)
		sum += out[i]
	}
	out[len(out)-1] += limit - sum
	for i := range out {
		if d := float64(out[i]) - float64(ceils[i]); d > 0.02*float64(limit) || -d > 0.02*float64(limit) {
			moved = true
		}
	}
	if !moved {
		return nil
	}
	return out
}
