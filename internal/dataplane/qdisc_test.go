package dataplane

import (
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/plan"
)

// tc computes a bucket's ticks from whole microseconds of transmit time;
// the padded bucket must still hold plan.ClassBurst bytes after that rounding,
// at any rate. (Xmitsize rounds to microseconds too, so the kernel's view,
// ticks of 1/TickInUsec µs, is computed here.)
func TestPaddedBucketSurvivesTickRounding(t *testing.T) {
	for _, bits := range []uint64{1e6, 100e6, 1e9, 10e9, 25e9, 40e9, 100e9} {
		rate, want := bits/8, plan.ClassBurst(bits)
		ticks := netlink.Xmittime(rate, padBucket(rate, want))
		got := float64(rate) * float64(ticks) / netlink.TickInUsec() / 1e6
		if got < float64(want) {
			t.Errorf("at %d bit/s the kernel would keep a %d-byte bucket, want at least %d", bits, int(got), want)
		}
	}
}
