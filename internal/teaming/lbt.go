package teaming

import (
	"sort"
	"time"
)

// LBTConfig is load-based teaming's trigger: an uplink whose mean send or
// receive utilization over Window exceeds Threshold sheds a port, at most
// once per Interval, and no port moves more often than Interval.
type LBTConfig struct {
	Threshold float64 // fraction of line rate, default 0.75
	Window    time.Duration
	Interval  time.Duration
}

// DefaultLBT is vSphere's: 75% over 30 s, every 30 s.
var DefaultLBT = LBTConfig{Threshold: 0.75, Window: 30 * time.Second, Interval: 30 * time.Second}

// Load is one sample of an uplink's utilization.
type Load struct {
	At     time.Time
	TxUtil float64 // fraction of line rate
	RxUtil float64
}

// Move is an LBT decision: carry Port's traffic on To instead of From.
type Move struct {
	Port, From, To string
	Why            string
}

// Balancer keeps LBT's history and decides moves. Shares and limits play no
// part, as in S4.
type Balancer struct {
	Config   LBTConfig
	history  map[string][]Load
	moved    map[string]time.Time // port -> last move
	lastMove time.Time
}

// NewBalancer returns a balancer with cfg, defaults filled in.
func NewBalancer(cfg LBTConfig) *Balancer {
	if cfg.Threshold <= 0 {
		cfg.Threshold = DefaultLBT.Threshold
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultLBT.Window
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultLBT.Interval
	}
	return &Balancer{Config: cfg, history: map[string][]Load{}, moved: map[string]time.Time{}}
}

// Observe records an uplink's utilization and forgets what fell out of the window.
func (b *Balancer) Observe(uplink string, l Load) {
	h := append(b.history[uplink], l)
	cut := 0
	for cut < len(h) && l.At.Sub(h[cut].At) > b.Config.Window {
		cut++
	}
	b.history[uplink] = h[cut:]
}

// mean is an uplink's mean utilization (the busier direction) over the
// window, and whether the history covers the whole window.
func (b *Balancer) mean(uplink string, now time.Time) (float64, bool) {
	h := b.history[uplink]
	if len(h) == 0 || now.Sub(h[0].At) < b.Config.Window*9/10 {
		return 0, false
	}
	var tx, rx float64
	for _, l := range h {
		tx += l.TxUtil
		rx += l.RxUtil
	}
	n := float64(len(h))
	return max(tx/n, rx/n), true
}

// Decide returns at most one move: the busiest port on an overloaded
// uplink that fits on the least-loaded active uplink that is up. portLoad
// is each port's recent rate as a fraction of its uplink's line rate.
func (b *Balancer) Decide(now time.Time, t Team, up map[string]bool, assign map[string]Assignment, portLoad map[string]float64) *Move {
	if !b.lastMove.IsZero() && now.Sub(b.lastMove) < b.Config.Interval {
		return nil
	}
	live := filterUp(t.Active, up) // never a standby, never outside the team
	if len(live) < 2 {
		return nil
	}
	util := map[string]float64{}
	for _, u := range live {
		m, ok := b.mean(u, now)
		if !ok {
			return nil // not enough history to judge
		}
		util[u] = m
	}
	sort.SliceStable(live, func(i, j int) bool { return util[live[i]] > util[live[j]] })
	busiest, idlest := live[0], live[len(live)-1]
	if util[busiest] <= b.Config.Threshold {
		return nil
	}
	var ports []string
	for id, a := range assign {
		if a.Uplink == busiest {
			ports = append(ports, id)
		}
	}
	sort.Slice(ports, func(i, j int) bool {
		if portLoad[ports[i]] != portLoad[ports[j]] {
			return portLoad[ports[i]] > portLoad[ports[j]]
		}
		return ports[i] < ports[j]
	})
	for _, p := range ports {
		load := portLoad[p]
		if load <= 0 {
			continue
		}
		if last, ok := b.moved[p]; ok && now.Sub(last) < b.Config.Interval {
			continue
		}
		// It fits if the target stays under the threshold with it.
		if util[idlest]+load > b.Config.Threshold {
			continue
		}
		b.moved[p], b.lastMove = now, now
		return &Move{Port: p, From: busiest, To: idlest,
			Why: "uplink over threshold for the window"}
	}
	return nil
}

// Apply records a move in an assignment.
func (m *Move) Apply(assign map[string]Assignment, now time.Time) {
	assign[m.Port] = Assignment{Uplink: m.To, Reason: Moved, Since: now}
}
