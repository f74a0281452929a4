// Package teamagent keeps an infrastructure's uplink teams right while it
// runs: it follows the uplinks' state (a pulled cable fails over within a
// second), samples their load for load-based teaming, re-steers ports and
// tells the physical switch where moved MACs now live. Its decisions come
// from packages teaming and plan; it only observes and acts.
package teamagent

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/ioc"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/teaming"
	"github.com/vnet-project/vnet/internal/units"
)

// Dataplane is what the agent needs from the kernel side.
type Dataplane interface {
	Observe(infra string, hints []plan.Resource) ([]plan.Resource, error)
	Execute(a plan.Action) error
	LinkStates(ns string) (map[string]status.Link, error)
	Announce(ns, link string, macs []string) error
	TCCounters(ns, link string) (map[uint32]plan.Counters, plan.Counters, error)
}

// Agent watches one infrastructure.
type Agent struct {
	Infra string
	DP    Dataplane
	Spec  func() (*spec.Spec, error) // the spec as last applied
	Log   io.Writer
	Tick  time.Duration // load sampling and link polling period; default 1s
	// Watch reports link changes in a namespace; default dataplane.WatchLinks.
	Watch func(ctx context.Context, ns string, changed chan<- string) error
	// Gone reports whether the infrastructure was destroyed (its record is
	// gone from the store); asked when its namespaces cannot be read, and
	// the agent ends when it says so. Nil: never.
	Gone func() bool
	// Event receives each failover, LBT move and limit split as it is
	// made (events.In(stateDir).Append keeps them for the API). Nil: only
	// the log has them.
	Event func(events.Event)
	// Scope gives the options that say which part of the spec the agent
	// keeps and in whose names: on a real host the host's part
	// (plan.Options.Host, HostNS, DeviceSpeeds), as its host agent
	// realizes it. Nil: the whole spec, as the lab realizes it.
	Scope func(*spec.Spec) plan.Options

	gone  bool
	scope plan.Options

	reload    chan struct{}
	once      sync.Once
	spec      *spec.Spec
	teams     []plan.HostTeam
	current   []plan.Resource // steering and pool classes as realized
	limits    []plan.TeamLimit
	poolCeils map[string]uint64
	balancers map[string]*teaming.Balancer
	last      map[string]counterSample
	watching  map[string]bool
}

type counterSample struct {
	at     time.Time
	tx, rx uint64
}

// Reload makes a running agent read the spec again (after an apply).
func (a *Agent) Reload() {
	a.init()
	select {
	case a.reload <- struct{}{}:
	default:
	}
}

func (a *Agent) init() {
	a.once.Do(func() {
		a.reload = make(chan struct{}, 1)
		if a.Tick <= 0 {
			a.Tick = time.Second
		}
		if a.Log == nil {
			a.Log = io.Discard
		}
		if a.Watch == nil {
			a.Watch = dataplane.WatchLinks
		}
	})
}

// Run works until ctx ends. It fails only if the infrastructure cannot be
// read at start.
func (a *Agent) Run(ctx context.Context) error {
	a.init()
	if err := a.load(); err != nil {
		return err
	}
	changed := make(chan string, 1)
	a.watching = map[string]bool{}
	a.watchTeams(ctx, changed)
	a.logf("agent for %s: %d teams on %d hosts", a.Infra, len(a.teams), len(a.hostNamespaces()))
	tick := time.NewTicker(a.Tick)
	defer tick.Stop()
	a.step(time.Now(), false)
	for !a.gone {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			a.step(time.Now(), false)
		case now := <-tick.C:
			a.step(now, true)
		case <-a.reload:
			if err := a.load(); err != nil {
				a.logf("reload: %v (keeping the previous spec)", err)
				continue
			}
			a.watchTeams(ctx, changed)
			a.step(time.Now(), false)
		}
	}
	a.logf("agent for %s: the infrastructure is gone; stopping", a.Infra)
	return nil
}

func (a *Agent) logf(format string, args ...any) {
	fmt.Fprintf(a.Log, time.Now().Format("15:04:05.000")+" "+format+"\n", args...)
}

// load reads the spec and what steering the kernel holds.
func (a *Agent) load() error {
	s, err := a.Spec()
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.Infra, err)
	}
	observed, err := a.DP.Observe(a.Infra, nil)
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.Infra, err)
	}
	a.scope = plan.Options{}
	if a.Scope != nil {
		a.scope = a.Scope(s)
	}
	a.spec, a.current = s, runtimeState(observed)
	a.teams, a.limits = plan.Teaming(s, a.scope)
	a.poolCeils = plan.PoolCeils(observed)
	if a.balancers == nil {
		a.balancers, a.last = map[string]*teaming.Balancer{}, map[string]counterSample{}
	}
	return nil
}

// runtimeState is what the agent changes as conditions change: which
// uplink each port uses, and how team-wide limits are split.
func runtimeState(rs []plan.Resource) []plan.Resource {
	var out []plan.Resource
	for _, r := range rs {
		if r.Kind == plan.KindSteer || r.Kind == plan.KindPool {
			out = append(out, r)
		}
	}
	return out
}

func (a *Agent) hostNamespaces() []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range a.teams {
		if !seen[t.NS] {
			seen[t.NS] = true
			out = append(out, t.NS)
		}
	}
	for _, l := range a.limits {
		if !seen[l.NS] {
			seen[l.NS] = true
			out = append(out, l.NS)
		}
	}
	return out
}

func (a *Agent) watchTeams(ctx context.Context, changed chan<- string) {
	for _, ns := range a.hostNamespaces() {
		if a.watching[ns] {
			continue
		}
		a.watching[ns] = true
		go func() {
			if err := a.Watch(ctx, ns, changed); err != nil {
				a.logf("%v: falling back to polling every %s", err, a.Tick)
			}
		}()
	}
}

// step looks at the uplinks (and with sample, at the load), decides, and
// re-steers what the decisions changed.
func (a *Agent) step(now time.Time, sample bool) {
	states := map[string]map[string]status.Link{}
	for _, ns := range a.hostNamespaces() {
		st, err := a.DP.LinkStates(ns)
		if err != nil {
			a.gone = a.Gone != nil && a.Gone()
			if !a.gone {
				a.logf("%v", err)
			}
			return
		}
		states[ns] = st
	}
	down := DownUplinks(a.teams, states)
	prev := plan.Assignments(a.current)
	if sample {
		a.balance(now, states, down, prev)
		a.splitLimits(now)
	}
	opt := a.scope
	opt.Teams, opt.Down, opt.PoolCeils, opt.Now = prev, down, a.poolCeils, now.UTC().Truncate(time.Second)
	desired := runtimeState(plan.Model(a.spec, opt))
	a.current = plan.ResolveSteer(a.current, desired)
	p := plan.Diff(desired, a.current)
	if p.Empty() {
		return
	}
	failed := false
	for _, act := range p.Actions {
		if err := a.DP.Execute(act); err != nil {
			a.logf("%v", err)
			failed = true
		}
	}
	before := plan.Assignments(a.current)
	a.current = desired
	if failed {
		if observed, err := a.DP.Observe(a.Infra, nil); err == nil {
			a.current, a.poolCeils = runtimeState(observed), plan.PoolCeils(observed)
		}
	}
	a.report(before, plan.Assignments(a.current), down)
}

// DownUplinks are the teams' uplinks whose NIC is not up with carrier, as
// "host/uplink" (plan.Options.Down), from each namespace's link states.
func DownUplinks(teams []plan.HostTeam, states map[string]map[string]status.Link) map[string]bool {
	down := map[string]bool{}
	for _, t := range teams {
		for _, u := range t.Uplinks {
			if !states[t.NS][t.NIC[u]].Up {
				down[t.Host+"/"+u] = true
			}
		}
	}
	return down
}

// balance feeds LBT the load since the last sample and applies its moves
// to prev.
func (a *Agent) balance(now time.Time, states map[string]map[string]status.Link, down map[string]bool, prev map[string]teaming.Assignment) {
	rates := map[string][2]float64{} // ns/link -> tx, rx bit/s
	for ns, links := range states {
		for name, st := range links {
			key := ns + "/" + name
			if last, ok := a.last[key]; ok && now.After(last.at) && st.TxBytes >= last.tx && st.RxBytes >= last.rx {
				dt := now.Sub(last.at).Seconds()
				rates[key] = [2]float64{float64(st.TxBytes-last.tx) * 8 / dt, float64(st.RxBytes-last.rx) * 8 / dt}
			}
			a.last[key] = counterSample{at: now, tx: st.TxBytes, rx: st.RxBytes}
		}
	}
	for _, t := range a.teams {
		if t.Team.Policy != teaming.LoadBased {
			continue
		}
		key := t.Host + "/" + t.PortGroup
		b, ok := a.balancers[key]
		if !ok {
			b = teaming.NewBalancer(t.Team.LBT)
			a.balancers[key] = b
		}
		up := map[string]bool{}
		for _, u := range t.Uplinks {
			up[u] = !down[t.Host+"/"+u]
			r, ok := rates[t.NS+"/"+t.NIC[u]]
			if line := float64(t.Line[u]); ok && line > 0 {
				b.Observe(u, teaming.Load{At: now, TxUtil: r[0] / line, RxUtil: r[1] / line})
			}
		}
		assign := map[string]teaming.Assignment{}
		portLoad := map[string]float64{}
		for _, p := range t.Ports {
			as, ok := prev[p.ID]
			if !ok {
				continue
			}
			assign[p.ID] = as
			if line := float64(t.Line[as.Uplink]); line > 0 {
				r := rates[t.NS+"/"+p.Link]
				portLoad[p.ID] = max(r[0], r[1]) / line
			}
		}
		if m := b.Decide(now, t.Team.Team, up, assign, portLoad); m != nil {
			a.logf("LBT on %s: port %s %s -> %s (%s, %.0f%% of line)", t.Host, m.Port, m.From, m.To, m.Why, portLoad[m.Port]*100)
			m.Apply(prev, now.UTC().Truncate(time.Second))
		}
	}
}

// splitLimits moves each team-wide limit's split toward where its pool's
// traffic is (ioc.SplitLimit), from the pool classes' byte counters.
func (a *Agent) splitLimits(now time.Time) {
	counters := map[string]map[uint32]plan.Counters{} // ns/nic, read once per tick
	for _, tl := range a.limits {
		ceils := make([]uint64, len(tl.NICs))
		rates := make([]float64, len(tl.NICs))
		complete := true
		for i, nic := range tl.NICs {
			classes, ok := counters[tl.NS+"/"+nic]
			if !ok {
				var err error
				if classes, _, err = a.DP.TCCounters(tl.NS, nic); err != nil {
					a.logf("%v", err)
					return
				}
				counters[tl.NS+"/"+nic] = classes
			}
			key := plan.LimitKey(tl.NS, nic, tl.Minor)
			ceils[i] = a.poolCeils[key]
			bytes := classes[tl.Minor].Bytes
			last, ok := a.last[key]
			if ok && now.After(last.at) && bytes >= last.tx {
				rates[i] = float64(bytes-last.tx) * 8 / now.Sub(last.at).Seconds()
			} else {
				complete = false
			}
			a.last[key] = counterSample{at: now, tx: bytes}
		}
		if !complete {
			continue
		}
		if next := ioc.SplitLimit(tl.Limit, ceils, rates); next != nil {
			for i, nic := range tl.NICs {
				a.poolCeils[plan.LimitKey(tl.NS, nic, tl.Minor)] = next[i]
			}
			a.logf("%s: pool %s limit %s split %s (was %s, using %s)", tl.Host, tl.Pool, units.Rate(tl.Limit), rateList(next), rateList(ceils), rateListF(rates))
			a.emit(events.Event{Action: events.LimitSplit, Host: tl.Host, Port: "pool " + tl.Pool,
				From: rateList(ceils), To: rateList(next),
				Message: fmt.Sprintf("limit %s over %s, using %s", units.Rate(tl.Limit), strings.Join(tl.NICs, "/"), rateListF(rates))})
		}
	}
}

func rateList(xs []uint64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = units.Rate(x).String()
	}
	return strings.Join(parts, "/")
}

func rateListF(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0fMbit", x/1e6)
	}
	return strings.Join(parts, "/")
}

// report logs each port that changed uplink and announces it on its new
// uplink when its team notifies.
func (a *Agent) report(before, after map[string]teaming.Assignment, down map[string]bool) {
	announce := map[[2]string][]string{} // ns, nic -> MACs
	for _, t := range a.teams {
		for _, p := range t.Ports {
			was, now := before[p.ID], after[p.ID]
			if was.Uplink == now.Uplink {
				continue
			}
			a.logf("%s: port %s %s -> %s (%s)", t.Host, p.ID, orNone(was.Uplink), orNone(now.Uplink), now.Reason)
			a.emit(events.Event{Action: moveKind(was, now, down[t.Host+"/"+was.Uplink]), Host: t.Host, Port: p.ID,
				From: orNone(was.Uplink), To: orNone(now.Uplink), Message: string(now.Reason)})
			if t.Team.Notify && now.Uplink != "" {
				k := [2]string{t.NS, t.NIC[now.Uplink]}
				announce[k] = append(announce[k], p.MAC)
			}
		}
	}
	keys := make([][2]string, 0, len(announce))
	for k := range announce {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return strings.Join(keys[i][:], "/") < strings.Join(keys[j][:], "/") })
	for _, k := range keys {
		if err := a.DP.Announce(k[0], k[1], announce[k]); err != nil {
			a.logf("notify: %v", err)
		}
	}
}

// moveKind names why a port changed uplink: its uplink went down, LBT
// moved it, or otherwise (an uplink came back, or the spec changed).
func moveKind(was, now teaming.Assignment, wasDown bool) string {
	switch {
	case now.Reason == teaming.Moved:
		return events.LBTMove
	case was.Uplink != "" && wasDown, now.Uplink == "", now.Reason == teaming.FailedTo:
		return events.Failover
	}
	return events.Failback
}

func (a *Agent) emit(ev events.Event) {
	if a.Event == nil {
		return
	}
	ev.Time, ev.Infra, ev.Who, ev.OK = time.Now().UTC(), a.Infra, "agent", true
	a.Event(ev)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
