package reconcile

import (
	"fmt"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

// Counting is what ioc stats needs from the dataplane.
type Counting interface {
	TCCounters(ns, link string) (map[uint32]plan.Counters, plan.Counters, error)
}

// IOCStats is one sample of Network I/O Control's counters.
type IOCStats struct {
	Infra    string        `json:"infra"`
	At       time.Time     `json:"at"`
	Interval float64       `json:"interval_s"`
	Uplinks  []UplinkStats `json:"uplinks"`
	Shapers  []ShaperStats `json:"shapers"`
}

// UplinkStats is one host's uplink and its pools.
type UplinkStats struct {
	Host   string      `json:"host"`
	Switch string      `json:"switch"`
	NIC    string      `json:"nic"`
	Line   uint64      `json:"line_bps"`
	Rate   float64     `json:"rate_bps"`
	Pools  []PoolStats `json:"pools"`
}

// PoolStats is one pool's class on an uplink.
type PoolStats struct {
	Pool     string        `json:"pool"`
	Class    string        `json:"class"`
	Assured  uint64        `json:"assured_bps"`
	Ceil     uint64        `json:"ceil_bps"`
	Rate     float64       `json:"rate_bps"`
	Share    float64       `json:"share_of_line"` // Rate / Line
	Counters plan.Counters `json:"counters"`
}

// ShaperStats is one port's shaper.
type ShaperStats struct {
	Port     string        `json:"port"`
	NS       string        `json:"ns"`
	Link     string        `json:"link"`
	Average  uint64        `json:"average_bps"`
	Peak     uint64        `json:"peak_bps"`
	Burst    uint64        `json:"burst_bytes"`
	Rate     float64       `json:"rate_bps"`
	Counters plan.Counters `json:"counters"`
}

// CollectIOCStats samples every IOC uplink and shaper of an infra twice,
// interval apart, and reports rates over the interval and counters at its end.
func CollectIOCStats(c Counting, doc *spec.Document, interval time.Duration) (*IOCStats, error) {
	uplinks := plan.IOCUplinks(doc.Spec)
	var shapers []plan.Resource
	for _, r := range plan.Model(doc.Spec, plan.Options{}) {
		if r.Kind == plan.KindShaper {
			shapers = append(shapers, r)
		}
	}
	type reading struct {
		classes map[uint32]plan.Counters
		root    plan.Counters
	}
	read := func() (map[string]reading, error) {
		out := map[string]reading{}
		links := map[string][2]string{}
		for _, u := range uplinks {
			links[u.NS+"/"+u.NIC] = [2]string{u.NS, u.NIC}
		}
		for _, s := range shapers {
			links[s.NS+"/"+s.Link] = [2]string{s.NS, s.Link}
		}
		for k, l := range links {
			cls, root, err := c.TCCounters(l[0], l[1])
			if err != nil {
				return nil, fmt.Errorf("%s: %w (is %s applied?)", k, err, doc.Spec.Name)
			}
			out[k] = reading{cls, root}
		}
		return out, nil
	}
	a, err := read()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	time.Sleep(interval)
	b, err := read()
	if err != nil {
		return nil, err
	}
	secs := time.Since(start).Seconds()
	rate := func(x, y plan.Counters) float64 { return float64(y.Bytes-x.Bytes) * 8 / secs }

	st := &IOCStats{Infra: doc.Spec.Name, At: time.Now().UTC(), Interval: secs}
	for _, u := range uplinks {
		k := u.NS + "/" + u.NIC
		us := UplinkStats{Host: u.Host, Switch: u.Switch, NIC: u.NIC, Line: u.Line}
		for _, cl := range u.Classes {
			x, y := a[k].classes[cl.Minor], b[k].classes[cl.Minor]
			ps := PoolStats{Pool: cl.Pool, Class: fmt.Sprintf("1:%x", cl.Minor), Assured: cl.Rate, Ceil: cl.Ceil, Rate: rate(x, y), Counters: y}
			ps.Share = ps.Rate / float64(u.Line)
			us.Rate += ps.Rate
			us.Pools = append(us.Pools, ps)
		}
		st.Uplinks = append(st.Uplinks, us)
	}
	for _, s := range shapers {
		k := s.NS + "/" + s.Link
		st.Shapers = append(st.Shapers, ShaperStats{Port: s.Owner, NS: s.NS, Link: s.Link, Average: s.Rate, Peak: max(s.Ceil, s.Rate),
			Burst: s.Burst, Rate: rate(a[k].root, b[k].root), Counters: b[k].root})
	}
	return st, nil
}
