package spec

import (
	"fmt"
	"sort"

	"github.com/vnet-project/vnet/internal/ioc"
	"github.com/vnet-project/vnet/internal/units"
)

// checkIOC validates a switch's Network I/O Control, its port groups'
// pools, shaping and rules, and runs admission control on reservations.
func (v *validator) checkIOC(i int, sw *Switch) {
	p := indexPath("switches", i)
	pools := map[string]bool{}
	for _, name := range ioc.SystemPools {
		pools[name] = true
	}
	if sw.IOC != nil {
		var specs []ioc.Pool
		for _, name := range sortedPoolNames(sw.IOC.Pools) {
			ps := sw.IOC.Pools[name]
			pp := fmt.Sprintf("%s.ioc.pools.%s", p, name)
			if !ioc.IsSystemPool(name) {
				v.checkName(pp, name, maxObjectName, objectName, "a pool")
			}
			pools[name] = true
			shares, err := ioc.ParseShares(ps.Shares)
			if err != nil {
				v.errf(pp+".shares", "%v", err)
			}
			okRates := v.checkRate(pp+".limit", ps.Limit)
			okRates = v.checkRate(pp+".reservation", ps.Reservation) && okRates
			if okRates && ps.Limit != 0 && ps.Reservation > ps.Limit {
				v.errf(pp+".reservation", "reservation %s is above the limit %s", ps.Reservation, ps.Limit)
			}
			specs = append(specs, ioc.Pool{Name: name, Shares: shares, Limit: uint64(ps.Limit), Reservation: uint64(ps.Reservation)})
		}
		if slowest := v.slowestUplink(sw); slowest > 0 && sw.IOCEnabled() {
			if err := ioc.Admit(specs, slowest); err != nil {
				v.errf(p+".ioc.pools", "admission control: %v", err)
			}
		}
	}
	for j := range sw.PortGroups {
		v.checkPortGroupPolicy(indexPath(p+".portgroups", j), &sw.PortGroups[j], sw, pools)
	}
}

func (v *validator) checkPortGroupPolicy(p string, pg *PortGroup, sw *Switch, pools map[string]bool) {
	if pg.Pool != "" || len(pg.Classify) > 0 {
		if !sw.IOCEnabled() {
			field := p + ".pool"
			if pg.Pool == "" {
				field = p + ".classify"
			}
			v.errf(field, "switch %q does not run Network I/O Control (set ioc: {enabled: true})", sw.Name)
			return
		}
	}
	if pg.Pool != "" && !pools[pg.Pool] {
		v.errf(p+".pool", "unknown pool %q (system pools: management, vmotion, ft, iscsi, nfs, vm; others go under ioc.pools)", pg.Pool)
	}
	for k, r := range pg.Classify {
		rp := indexPath(p+".classify", k)
		switch {
		case r.Pool == "":
			v.errf(rp+".pool", "a rule names the pool its traffic goes to")
		case !pools[r.Pool]:
			v.errf(rp+".pool", "unknown pool %q", r.Pool)
		}
		if _, err := ioc.RuleKeys(r.Rule()); err != nil {
			v.errf(rp, "%v", err)
		}
	}
	if pg.Shaping != nil {
		for _, d := range []struct {
			name string
			s    *Shaper
		}{{"egress", pg.Shaping.Egress}, {"ingress", pg.Shaping.Ingress}} {
			if d.s == nil {
				continue
			}
			v.checkShaper(p+".shaping."+d.name, d.s)
		}
	}
}

func (v *validator) checkShaper(sp string, s *Shaper) {
	okAvg := v.checkRate(sp+".average", s.Average)
	okPeak := v.checkRate(sp+".peak", s.Peak)
	switch {
	case s.Average == 0:
		v.errf(sp+".average", "a shaper needs an average rate")
		okAvg = false
	case okAvg && okPeak && s.Peak != 0 && s.Peak < s.Average:
		v.errf(sp+".peak", "peak %s is below the average %s", s.Peak, s.Average)
	}
	switch {
	case s.Burst == 0:
		v.errf(sp+".burst", "a shaper needs a burst size, e.g. 100KiB")
	case s.Burst < minBurst:
		v.errf(sp+".burst", "burst %s is smaller than two frames", s.Burst)
	case s.Burst > MaxBurst:
		v.errf(sp+".burst", "burst %s is larger than %s", s.Burst, MaxBurst)
	case okAvg && float64(s.Burst) > s.Average.Bytes(MaxBurstTime):
		v.errf(sp+".burst", "burst %s lasts more than %s at the average %s (at most %s): the kernel would cut it short",
			s.Burst, MaxBurstTime, s.Average, units.Size(s.Average.Bytes(MaxBurstTime)))
	}
}

// Rule converts a spec rule for package ioc.
func (r ClassifyRule) Rule() ioc.Rule {
	dscp := -1
	if r.DSCP != nil {
		dscp = *r.DSCP
	}
	return ioc.Rule{Proto: r.Proto, SPort: r.SPort, DPort: r.DPort, DSCP: dscp, Src: r.Src, Dst: r.Dst}
}

// slowestUplink is the slowest NIC bound to the switch on any host.
func (v *validator) slowestUplink(sw *Switch) uint64 {
	var slowest uint64
	for _, u := range sw.Uplinks {
		for host, nic := range u.NICs {
			if h, ok := v.x.host(host); ok {
				if n, ok := v.x.nic(h, nic); ok && n.Speed > 0 && (slowest == 0 || uint64(n.Speed) < slowest) {
					slowest = uint64(n.Speed)
				}
			}
		}
	}
	return slowest
}

func sortedPoolNames(m map[string]PoolSpec) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// IOCPools returns the switch's pools for package ioc, in ioc's order.
func (s *Switch) IOCPools() []ioc.Pool {
	over := map[string]ioc.Pool{}
	if s.IOC != nil {
		for name, ps := range s.IOC.Pools {
			shares, _ := ioc.ParseShares(ps.Shares)
			over[name] = ioc.Pool{Shares: shares, Limit: uint64(ps.Limit), Reservation: uint64(ps.Reservation)}
		}
	}
	return ioc.Pools(over)
}
