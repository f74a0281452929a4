package metrics

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
)

// Rate is a rate in bit/s; NaN (no reading for that step) encodes as null,
// which charts draw as a gap.
type Rate float64

// MarshalJSON writes null for NaN.
func (r Rate) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(r)) {
		return []byte("null"), nil
	}
	return json.Marshal(math.Round(float64(r)))
}

// Series are the rates of each step between consecutive snapshots: what a
// chart of an uplink's or a pool's use over time draws.
type Series struct {
	Infra   string         `json:"infra"`
	Time    []float64      `json:"time"` // Unix seconds at the end of each step
	Uplinks []UplinkSeries `json:"uplinks"`
	Pools   []PoolSeries   `json:"pools"`
	Ports   []PortSeries   `json:"ports"`
}

// UplinkSeries is one uplink's rates over time.
type UplinkSeries struct {
	Host   string `json:"host"`
	Switch string `json:"switch"`
	Uplink string `json:"uplink"`
	NIC    string `json:"nic"`
	Line   uint64 `json:"line_bps"`
	Up     bool   `json:"up"`
	Tx     []Rate `json:"tx_bps"`
	Rx     []Rate `json:"rx_bps"`
}

// PoolSeries is one pool's transmit rate on one uplink over time, with the
// policy to draw it against.
type PoolSeries struct {
	Host        string `json:"host"`
	Switch      string `json:"switch"`
	Uplink      string `json:"uplink"`
	Pool        string `json:"pool"`
	Shares      int    `json:"shares"`
	Limit       uint64 `json:"limit_bps,omitempty"`
	Reservation uint64 `json:"reservation_bps,omitempty"`
	Assured     uint64 `json:"assured_bps"`
	Ceil        uint64 `json:"ceil_bps"`
	Tx          []Rate `json:"tx_bps"`
}

// PortSeries is one vNIC's rates over time.
type PortSeries struct {
	Host      string `json:"host"`
	VM        string `json:"vm,omitempty"`
	VNIC      string `json:"vnic"`
	PortGroup string `json:"portgroup"`
	Tx        []Rate `json:"tx_bps"`
	Rx        []Rate `json:"rx_bps"`
	// TxDrops and RxDrops are the packets per second the vNIC itself
	// dropped sending and receiving (PortSample's).
	TxDrops []Rate `json:"tx_drops_pps"`
	RxDrops []Rate `json:"rx_drops_pps"`
	// Dropped is what the port's firewall dropped, in packets per second:
	// its security checks' drops and its ACL default's (an ACL rule's
	// counter counts matches, allowed or not, and is left out). Only ports
	// with port security or an ACL have it.
	Dropped []Rate `json:"security_drops_pps,omitempty"`
}

// MakeSeries turns snapshots, oldest first, into per-step rates; the
// objects are those of the newest snapshot.
func MakeSeries(snaps []*Snapshot) *Series {
	out := &Series{}
	if len(snaps) == 0 {
		return out
	}
	last := snaps[len(snaps)-1]
	out.Infra = last.Infra
	steps := len(snaps) - 1
	for i := 1; i < len(snaps); i++ {
		out.Time = append(out.Time, float64(snaps[i].At.UnixMilli())/1000)
	}
	// perSecond gives the rate of one counter from snapshot i-1 to i.
	perSecond := func(i int, a, b uint64, okA, okB bool) Rate {
		secs := snaps[i].At.Sub(snaps[i-1].At).Seconds()
		if !okA || !okB || secs <= 0 {
			return Rate(math.NaN())
		}
		return Rate(float64(delta(a, b)) / secs)
	}
	// step gives a byte counter's rate in bit/s.
	step := func(i int, a, b uint64, okA, okB bool) Rate { return perSecond(i, a, b, okA, okB) * 8 }
	ports, uplinks, pools := indexSnapshots(snaps)
	drops := securityDrops(snaps)
	for _, u := range last.Uplinks {
		us := UplinkSeries{Host: u.Host, Switch: u.Switch, Uplink: u.Uplink, NIC: u.NIC, Line: u.Line, Up: u.Up,
			Tx: make([]Rate, steps), Rx: make([]Rate, steps)}
		for i := 1; i < len(snaps); i++ {
			a, okA := uplinks[i-1][u.Key()]
			b, okB := uplinks[i][u.Key()]
			us.Tx[i-1] = step(i, a.TxBytes, b.TxBytes, okA, okB)
			us.Rx[i-1] = step(i, a.RxBytes, b.RxBytes, okA, okB)
		}
		out.Uplinks = append(out.Uplinks, us)
	}
	for _, p := range last.Pools {
		ps := PoolSeries{Host: p.Host, Switch: p.Switch, Uplink: p.Uplink, Pool: p.Pool, Shares: p.Shares, Limit: p.Limit,
			Reservation: p.Reservation, Assured: p.Assured, Ceil: p.Ceil, Tx: make([]Rate, steps)}
		for i := 1; i < len(snaps); i++ {
			a, okA := pools[i-1][p.Key()]
			b, okB := pools[i][p.Key()]
			ps.Tx[i-1] = step(i, a.Counters.Bytes, b.Counters.Bytes, okA, okB)
		}
		out.Pools = append(out.Pools, ps)
	}
	for _, p := range last.Ports {
		ps := PortSeries{Host: p.Host, VM: p.VM, VNIC: p.VNIC, PortGroup: p.PortGroup, Tx: make([]Rate, steps), Rx: make([]Rate, steps),
			TxDrops: make([]Rate, steps), RxDrops: make([]Rate, steps)}
		for i := 1; i < len(snaps); i++ {
			a, okA := ports[i-1][p.Key()]
			b, okB := ports[i][p.Key()]
			ps.Tx[i-1] = step(i, a.TxBytes, b.TxBytes, okA, okB)
			ps.Rx[i-1] = step(i, a.RxBytes, b.RxBytes, okA, okB)
			ps.TxDrops[i-1] = perSecond(i, a.TxDrops, b.TxDrops, okA, okB)
			ps.RxDrops[i-1] = perSecond(i, a.RxDrops, b.RxDrops, okA, okB)
		}
		if _, ok := drops[len(snaps)-1][p.Key()]; ok {
			ps.Dropped = make([]Rate, steps)
			for i := 1; i < len(snaps); i++ {
				a, okA := drops[i-1][p.Key()]
				b, okB := drops[i][p.Key()]
				ps.Dropped[i-1] = perSecond(i, a, b, okA, okB)
			}
		}
		out.Ports = append(out.Ports, ps)
	}
	return out
}

// securityDrops indexes each snapshot's firewall drops by port, as
// PortSample.Key names ports.
func securityDrops(snaps []*Snapshot) []map[string]uint64 {
	out := make([]map[string]uint64, len(snaps))
	for i, s := range snaps {
		out[i] = map[string]uint64{}
		for _, p := range s.Security {
			key := PortSample{Host: p.Host, VM: p.VM, VNIC: p.VNIC}.Key()
			var n uint64
			for label, v := range p.Counters {
				if !strings.HasPrefix(label, "acl[") {
					n += v
				}
			}
			out[i][key] = n
		}
	}
	return out
}

// Thin keeps at most points+1 of snapshots (oldest first), evenly spaced
// and always the newest, so that a long window gives a chart as many
// steps as it can draw. Each step's rate is then the average over the
// snapshots left out, not a sample of one of them. Zero points keeps all.
func Thin(snaps []*Snapshot, points int) []*Snapshot {
	if points <= 0 || len(snaps) <= points+1 {
		return snaps
	}
	stride := (len(snaps) - 1 + points - 1) / points
	var kept []*Snapshot
	for i := len(snaps) - 1; i >= 0; i -= stride {
		kept = append(kept, snaps[i])
	}
	slices.Reverse(kept)
	return kept
}
