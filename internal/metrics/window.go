package metrics

import (
	"sort"
	"sync"
	"time"
)

// Ring keeps the latest snapshots of one infrastructure, oldest first.
type Ring struct {
	mu    sync.Mutex
	keep  time.Duration
	snaps []*Snapshot
}

// NewRing keeps snapshots no older than keep behind the newest.
func NewRing(keep time.Duration) *Ring { return &Ring{keep: keep} }

// Add appends a snapshot and forgets those that fell out of the history.
func (r *Ring) Add(s *Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snaps = append(r.snaps, s)
	cut := 0
	for cut < len(r.snaps)-1 && s.At.Sub(r.snaps[cut].At) > r.keep {
		cut++
	}
	if cut > 0 {
		r.snaps = append(r.snaps[:0:0], r.snaps[cut:]...)
	}
}

// Window returns the snapshots of the last d, up to the newest: those
// whose span comes closest to d.
func (r *Ring) Window(d time.Duration) []*Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.snaps) == 0 {
		return nil
	}
	newest := r.snaps[len(r.snaps)-1].At
	i := sort.Search(len(r.snaps), func(i int) bool { return newest.Sub(r.snaps[i].At) <= d })
	// The samples rarely fall on the window's start: take the one before
	// it when that covers the window more closely.
	if i > 0 && (i == len(r.snaps) || d-newest.Sub(r.snaps[i].At) > newest.Sub(r.snaps[i-1].At)-d) {
		i--
	}
	return append([]*Snapshot(nil), r.snaps[i:]...)
}

// Averages are rates averaged over a window of snapshots.
type Averages struct {
	Infra   string       `json:"infra"`
	From    time.Time    `json:"from"`
	To      time.Time    `json:"to"`
	Seconds float64      `json:"seconds"` // the span actually covered, at most the window asked for
	Samples int          `json:"samples"`
	Ports   []PortRate   `json:"ports"`
	Uplinks []UplinkRate `json:"uplinks"`
	Pools   []PoolRate   `json:"pools"`
}

// PortRate is a vNIC's (or host port's) average rates, in bit/s.
type PortRate struct {
	Host      string  `json:"host"`
	VM        string  `json:"vm,omitempty"`
	VNIC      string  `json:"vnic"`
	PortGroup string  `json:"portgroup"`
	Up        bool    `json:"up"`
	Tx        float64 `json:"tx_bps"`
	Rx        float64 `json:"rx_bps"`
}

// UplinkRate is an uplink's average rates, in bit/s.
type UplinkRate struct {
	Host   string  `json:"host"`
	Switch string  `json:"switch"`
	Uplink string  `json:"uplink"`
	NIC    string  `json:"nic"`
	Line   uint64  `json:"line_bps"`
	Up     bool    `json:"up"`
	Tx     float64 `json:"tx_bps"`
	Rx     float64 `json:"rx_bps"`
}

// PoolRate is a pool's average transmit rate on one uplink, with its
// policy, and the drops over the window and the backlog at its end.
type PoolRate struct {
	Host        string  `json:"host"`
	Switch      string  `json:"switch"`
	Uplink      string  `json:"uplink"`
	Pool        string  `json:"pool"`
	Shares      int     `json:"shares"`
	Limit       uint64  `json:"limit_bps,omitempty"`
	Reservation uint64  `json:"reservation_bps,omitempty"`
	Assured     uint64  `json:"assured_bps"`
	Ceil        uint64  `json:"ceil_bps"`
	Tx          float64 `json:"tx_bps"`
	Drops       uint64  `json:"drops"`
	Backlog     uint64  `json:"backlog_bytes"`
}

// delta is how much a counter grew from a to b; a counter that went back
// (its link was made again) counts from zero.
func delta(a, b uint64) uint64 {
	if b >= a {
		return b - a
	}
	return b
}

// Average computes rates over snapshots, oldest first. Fewer than two
// snapshots give no rates.
func Average(snaps []*Snapshot) *Averages {
	if len(snaps) == 0 {
		return &Averages{}
	}
	first, last := snaps[0], snaps[len(snaps)-1]
	avg := &Averages{Infra: last.Infra, From: first.At, To: last.At, Seconds: last.At.Sub(first.At).Seconds(), Samples: len(snaps)}
	bps := func(bytes uint64) float64 {
		if avg.Seconds <= 0 {
			return 0
		}
		return float64(bytes) * 8 / avg.Seconds
	}
	ports, uplinks, pools := indexSnapshots(snaps)
	for _, p := range last.Ports {
		k := p.Key()
		tx := sumOver(len(snaps), func(i int) (uint64, bool) { x, ok := ports[i][k]; return x.TxBytes, ok })
		rx := sumOver(len(snaps), func(i int) (uint64, bool) { x, ok := ports[i][k]; return x.RxBytes, ok })
		avg.Ports = append(avg.Ports, PortRate{Host: p.Host, VM: p.VM, VNIC: p.VNIC, PortGroup: p.PortGroup, Up: p.Up, Tx: bps(tx), Rx: bps(rx)})
	}
	for _, u := range last.Uplinks {
		k := u.Key()
		tx := sumOver(len(snaps), func(i int) (uint64, bool) { x, ok := uplinks[i][k]; return x.TxBytes, ok })
		rx := sumOver(len(snaps), func(i int) (uint64, bool) { x, ok := uplinks[i][k]; return x.RxBytes, ok })
		avg.Uplinks = append(avg.Uplinks, UplinkRate{Host: u.Host, Switch: u.Switch, Uplink: u.Uplink, NIC: u.NIC, Line: u.Line, Up: u.Up, Tx: bps(tx), Rx: bps(rx)})
	}
	for _, p := range last.Pools {
		k := p.Key()
		tx := sumOver(len(snaps), func(i int) (uint64, bool) { x, ok := pools[i][k]; return x.Counters.Bytes, ok })
		drops := sumOver(len(snaps), func(i int) (uint64, bool) { x, ok := pools[i][k]; return x.Counters.Drops, ok })
		avg.Pools = append(avg.Pools, PoolRate{Host: p.Host, Switch: p.Switch, Uplink: p.Uplink, Pool: p.Pool, Shares: p.Shares,
			Limit: p.Limit, Reservation: p.Reservation, Assured: p.Assured, Ceil: p.Ceil, Tx: bps(tx), Drops: drops, Backlog: p.Counters.Backlog})
	}
	return avg
}

// sumOver sums a counter's growth over n consecutive readings; a reading
// missing (the object was gone then) breaks the chain without a jump.
func sumOver(n int, read func(i int) (uint64, bool)) uint64 {
	var sum, prev uint64
	have := false
	for i := 0; i < n; i++ {
		v, ok := read(i)
		if !ok {
			have = false
			continue
		}
		if have {
			sum += delta(prev, v)
		}
		prev, have = v, true
	}
	return sum
}

// indexSnapshots keys each snapshot's ports, uplinks and pools, so that a
// counter can be followed from one snapshot to the next.
func indexSnapshots(snaps []*Snapshot) (ports []map[string]PortSample, uplinks []map[string]UplinkSample, pools []map[string]PoolSample) {
	ports = make([]map[string]PortSample, len(snaps))
	uplinks = make([]map[string]UplinkSample, len(snaps))
	pools = make([]map[string]PoolSample, len(snaps))
	for i, s := range snaps {
		ports[i], uplinks[i], pools[i] = map[string]PortSample{}, map[string]UplinkSample{}, map[string]PoolSample{}
		for _, p := range s.Ports {
			ports[i][p.Key()] = p
		}
		for _, u := range s.Uplinks {
			uplinks[i][u.Key()] = u
		}
		for _, p := range s.Pools {
			pools[i][p.Key()] = p
		}
	}
	return ports, uplinks, pools
}
