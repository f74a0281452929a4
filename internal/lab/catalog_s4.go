package lab

import (
	"fmt"
	"strings"

	"github.com/vnet-project/vnet/internal/netperf"
)

const s4Scaling = "10 GbE as 1 Gbit (rates divided by 10); constant-rate flows are vnet netperf streams shaped at their port group"

// s4Testbed is S4's host: one uplink, a VM per traffic type, vMotion from a
// host port. shares nil means no IOC; shaping maps port groups to their
// egress average rate in Mbit/s at scale 1.
func s4Testbed(shares map[string]int, shaping map[string]float64, sc Scale) string {
	var b strings.Builder
	fmt.Fprintf(&b, `name: lab-s4
hosts:
  - {name: host1, nics: [{name: vmnic0, speed: %s}]}
  - {name: client, native: true, nics: [{name: eth0, speed: %s, ip: 10.74.0.100/24}]}
switches:
  - name: dvs0
    uplinks: [{name: u1, nics: {host1: vmnic0}}]
`, sc.Rate(1000), sc.Rate(10000))
	if shares != nil {
		b.WriteString("    ioc:\n      enabled: true\n      pools:\n")
		for _, p := range sortedKeys(shares) {
			fmt.Fprintf(&b, "        %s: {shares: %d}\n", p, shares[p])
		}
	}
	b.WriteString("    portgroups:\n")
	for _, pg := range []struct{ name, pool string }{{"pg-vm", "vm"}, {"pg-nfs", "nfs"}, {"pg-nfs-rr", "nfs"}, {"pg-ft", "ft"}, {"pg-vmotion", "vmotion"}} {
		fmt.Fprintf(&b, "      - name: %s\n", pg.name)
		if shares != nil {
			fmt.Fprintf(&b, "        pool: %s\n", pg.pool)
		}
		if rate, ok := shaping[pg.name]; ok {
			fmt.Fprintf(&b, "        shaping: {egress: {average: %s, burst: 256KiB}}\n", sc.Rate(rate))
		}
	}
	b.WriteString(`vms:
  - {name: web, host: host1, nics: [{portgroup: pg-vm, ip: 10.74.0.11/24}]}
  - {name: nfs, host: host1, nics: [{portgroup: pg-nfs, ip: 10.74.0.12/24}]}
  - {name: ft, host: host1, nics: [{portgroup: pg-ft, ip: 10.74.0.13/24}]}
  - {name: nfsrr, host: host1, nics: [{portgroup: pg-nfs-rr, ip: 10.74.0.14/24}]}
hostports:
  - {host: host1, portgroup: pg-vmotion, ip: 10.74.0.1/24}
`)
	return b.String()
}

func s4Setup(x *Run, shares map[string]int, shaping map[string]float64) error {
	if err := x.Destroy(); err != nil {
		return err
	}
	if err := x.Apply("lab-s4", s4Testbed(shares, shaping, x.Scale)); err != nil {
		return err
	}
	return x.Netserver("lab-s4/client")
}

// stream is a bulk flow from a node of the S4 testbed, drawn in the
// experiment's timeline as name.
func stream(from, name string) Flow {
	return Flow{From: "lab-s4/" + from, Args: append([]string{"-H", "10.74.0.100"}, patternArgs("256K", "64K")...), Timeline: name}
}

// s4Needs: S4's shapes are about proportions of a line, not its rate.
var s4Needs = Needs{Lines: []float64{1000}, RateFree: true}

// phaseMark records where a phase of a timeline panel starts.
func phaseMark(x *Run, panel string, k int, name string) {
	x.Record(panel, name, "phase", float64(k*x.Seconds()), "s")
}

var s4SharesExample = &Experiment{
	Name: "s4-shares-example", Study: "S4", Title: "a lone 25-share pool, then contention",
	Published: "Shares apply only under contention: a lone pool gets the whole uplink whatever its shares; under contention pools divide it by shares (25 vs 100: 20%).",
	Scaling:   s4Scaling,
	Needs:     s4Needs,
	Chart:     Chart{Metric: "throughput", YLabel: "Mbit/s"},
	Run: func(x *Run) error {
		if err := s4Setup(x, map[string]int{"vm": 25, "vmotion": 100}, nil); err != nil {
			return err
		}
		const panel = "25 vs 100 shares"
		phaseMark(x, panel, 0, "VM pool alone")
		r, err := x.MeasurePhase(panel, 0, "VM pool alone", stream("web", "VM (25 shares)"))
		if err != nil {
			return err
		}
		x.Record("VM (25 shares)", "alone", "throughput", Mbit(r[0]), "Mbit/s")
		phaseMark(x, panel, 1, "VM pool vs vMotion")
		r, err = x.MeasurePhase(panel, 1, "VM pool vs vMotion", stream("web", "VM (25 shares)"), stream("host1", "vMotion (100 shares)"))
		if err != nil {
			return err
		}
		x.Record("VM (25 shares)", "contended", "throughput", Mbit(r[0]), "Mbit/s")
		x.Record("vMotion (100 shares)", "contended", "throughput", Mbit(r[1]), "Mbit/s")
		return nil
	},
	Judge: func(s Samples, sc Scale) Verdict {
		vm, vmo := s.Get("VM (25 shares)", "contended", "throughput"), s.Get("vMotion (100 shares)", "contended", "throughput")
		share := ratio(vm, vm+vmo)
		return judge("lone 25-share pool >= 90% of the line; contended share 20% +- 4 points", []Clause{
			{What: "lone pool / line", Value: ratio(s.Get("VM (25 shares)", "alone", "throughput"), sc.Of(1000)), Op: ">=", Limit: 0.9, Published: 1},
			{What: "contended share", Value: share, Op: ">", Limit: 0.16, Published: 0.2},
			{What: "contended share", Value: share, Op: "<", Limit: 0.24, Published: 0.2},
		})
	},
}

var s4Scenario1 = &Experiment{
	Name: "s4-scenario1", Study: "S4", Title: "VM traffic vs a migration flow, without and with IOC",
	Published: "VM traffic (~7 Gbps) and vMotion (> 8 Gbps peak) share one uplink. Without control the web workload's QoS drops; with VM shares = 2x vMotion shares it is unperturbed and vMotion takes twice as long.",
	Scaling:   s4Scaling,
	Needs:     s4Needs,
	Chart:     Chart{Metric: "throughput", YLabel: "Mbit/s"},
	Run: func(x *Run) error {
		for _, mode := range []struct {
			series string
			shares map[string]int
		}{{"without IOC", nil}, {"with IOC", map[string]int{"vm": 100, "vmotion": 50}}} {
			if err := s4Setup(x, mode.shares, map[string]float64{"pg-vm": 700}); err != nil {
				return err
			}
			phaseMark(x, mode.series, 0, "VM alone")
			r, err := x.MeasurePhase(mode.series, 0, mode.series+": VM alone", stream("web", "VM flow"))
			if err != nil {
				return err
			}
			x.Record(mode.series, "VM alone", "throughput", Mbit(r[0]), "Mbit/s")
			phaseMark(x, mode.series, 1, "VM + vMotion")
			r, err = x.MeasurePhase(mode.series, 1, mode.series+": VM + vMotion", stream("web", "VM flow"), stream("host1", "vMotion"))
			if err != nil {
				return err
			}
			x.Record(mode.series, "VM beside vMotion", "throughput", Mbit(r[0]), "Mbit/s")
			x.Record(mode.series, "vMotion", "throughput", Mbit(r[1]), "Mbit/s")
		}
		return nil
	},
	Judge: func(s Samples, sc Scale) Verdict {
		with := ratio(s.Get("with IOC", "VM beside vMotion", "throughput"), s.Get("with IOC", "VM alone", "throughput"))
		without := ratio(s.Get("without IOC", "VM beside vMotion", "throughput"), s.Get("without IOC", "VM alone", "throughput"))
		return judge("with IOC the VM flow keeps >= 90% of its rate beside vMotion, and more than without", []Clause{
			{What: "VM flow kept with IOC", Value: with, Op: ">=", Limit: 0.9, Published: 1},
			{What: "VM flow kept without / with IOC", Value: ratio(without, with), Op: "<", Limit: 1},
		})
	},
}

var s4Scenario2 = &Experiment{
	Name: "s4-scenario2", Study: "S4", Title: "VM + NFS + FT, then vMotion, without and with IOC; critical latency as RR percentiles",
	Published: "VM 3 Gbps + NFS 850 Mbps + FT 900 Mbps, then vMotion at 8.5 Gbps peak. Without control web sessions meeting QoS drop ~67% and NFS max latency goes 162 ms -> 2166 ms (13x); with shares FT 100, NFS 75, VM 75, iSCSI 75, vMotion 50, management 50 both are unperturbed.",
	Scaling:   s4Scaling + "; NFS latency is a TCP_RR in the NFS pool",
	// The p99 of a round trip is where a machine slow to wake a core
	// shows. Not rate-free: at a tenth of the rate each frame ahead of a
	// request in its pool's queue takes ten times as long to send.
	Needs: Needs{Lines: s4Needs.Lines, CrossCore: true, Cores: 2},
	Chart: Chart{Metric: "p99", YLabel: "NFS TCP_RR p99 (µs)"},
	Run: func(x *Run) error {
		shaping := map[string]float64{"pg-vm": 300, "pg-nfs": 85, "pg-ft": 90}
		for _, mode := range []struct {
			series string
			shares map[string]int
		}{{"without IOC", nil}, {"with IOC", map[string]int{"ft": 100, "nfs": 75, "vm": 75, "iscsi": 75, "vmotion": 50, "management": 50}}} {
			if err := s4Setup(x, mode.shares, shaping); err != nil {
				return err
			}
			rr := Flow{From: "lab-s4/nfsrr", Args: []string{"-H", "10.74.0.100", "-t", "TCP_RR"}}
			for k, phase := range []struct {
				label   string
				vmotion bool
			}{{"critical flows", false}, {"plus vMotion", true}} {
				flows := []Flow{rr, stream("web", "VM"), stream("nfs", "NFS"), stream("ft", "FT")}
				if phase.vmotion {
					flows = append(flows, stream("host1", "vMotion"))
				}
				phaseMark(x, mode.series, k, phase.label)
				r, err := x.MeasurePhase(mode.series, k, mode.series+": "+phase.label, flows...)
				if err != nil {
					return err
				}
				recordLatency(x, mode.series, phase.label, r[0])
				x.Record(mode.series, phase.label, "critical_throughput", Mbit(r[1])+Mbit(r[2])+Mbit(r[3]), "Mbit/s")
			}
		}
		return nil
	},
	Judge: func(s Samples, sc Scale) Verdict {
		with := ratio(s.Get("with IOC", "plus vMotion", "p99"), s.Get("with IOC", "critical flows", "p99"))
		without := ratio(s.Get("without IOC", "plus vMotion", "p99"), s.Get("without IOC", "critical flows", "p99"))
		keep := ratio(s.Get("with IOC", "plus vMotion", "critical_throughput"), s.Get("with IOC", "critical flows", "critical_throughput"))
		return judge("with IOC the NFS p99 stays <= 1.5x its level before vMotion and the critical flows keep >= 90%; without IOC the p99 grows >= 3x", []Clause{
			{What: "NFS p99 ratio with IOC", Value: with, Op: "<=", Limit: 1.5, Published: 1},
			{What: "NFS p99 ratio without IOC", Value: without, Op: ">=", Limit: 3, Published: 13.4},
			{What: "critical flows kept with IOC", Value: keep, Op: ">=", Limit: 0.9, Published: 1},
		})
	},
}

func recordLatency(x *Run, series, label string, r *netperf.Result) {
	if r.Latency == nil {
		return
	}
	x.Record(series, label, "p50", r.Latency.P50, "µs")
	x.Record(series, label, "p99", r.Latency.P99, "µs")
	x.Record(series, label, "max", r.Latency.Max, "µs")
}

func s4cTestbed(limit, shaping bool, sc Scale) string {
	var b strings.Builder
	fmt.Fprintf(&b, `name: lab-s4c
hosts:
  - {name: host1, nics: [{name: vmnic0, speed: %[1]s}]}
  - {name: host2, nics: [{name: vmnic0, speed: %[1]s}]}
  - {name: host3, nics: [{name: vmnic0, speed: %[2]s}]}
switches:
  - name: dvs0
    uplinks: [{name: u1, nics: {host1: vmnic0, host2: vmnic0, host3: vmnic0}}]
`, sc.Rate(1000), sc.Rate(100))
	if limit {
		fmt.Fprintf(&b, "    ioc: {enabled: true, pools: {vmotion: {limit: %s}}}\n", sc.Rate(300))
	}
	b.WriteString("    portgroups:\n      - name: pg-vmotion\n")
	if limit {
		b.WriteString("        pool: vmotion\n")
	}
	if shaping {
		fmt.Fprintf(&b, "        shaping: {ingress: {average: %s, burst: 256KiB}}\n", sc.Rate(300))
	}
	b.WriteString(`hostports:
  - {host: host1, portgroup: pg-vmotion, ip: 10.75.0.1/24}
  - {host: host2, portgroup: pg-vmotion, ip: 10.75.0.2/24}
  - {host: host3, portgroup: pg-vmotion, ip: 10.75.0.3/24}
`)
	return b.String()
}

var s4Scenario3 = &Experiment{
	Name: "s4-scenario3", Study: "S4", Title: "two migrations converging on one host: no control, a limit, a limit plus ingress shaping",
	Published: "Two vMotions (9 Gbps from host 2, 1 Gbps from host 3 over a 1 GbE link) converge on host 1. Without control the receive link saturates; with a vMotion limit of 3000 Mbps host 2 sends 3 Gbps and the sum is ~4 Gbps; adding 3 Gbps ingress shaping on the destination's vMotion port group keeps the sum <= 3 Gbps.",
	Scaling:   "10 GbE as 1 Gbit and 1 GbE as 100 Mbit (divided by 10); the limit 3000 Mbps as 300 Mbit",
	Needs:     Needs{Lines: []float64{1000, 100}, RateFree: true},
	Baselines: func(s Samples, sc Scale) []Baseline {
		return []Baseline{{What: "no control, both migrations", Got: s.Get("no control", "sum", "throughput"), Line: sc.Of(1000)}}
	},
	Chart: Chart{Metric: "throughput", YLabel: "Mbit/s into host 1", ShapeUnit: "Mbit/s"},
	Run: func(x *Run) error {
		const panel = "migrations into host 1"
		for k, c := range []struct {
			series         string
			limit, shaping bool
		}{{"no control", false, false}, {"limit", true, false}, {"limit + ingress shaping", true, true}} {
			if err := x.Destroy(); err != nil {
				return err
			}
			if err := x.Apply("lab-s4c", s4cTestbed(c.limit, c.shaping, x.Scale)); err != nil {
				return err
			}
			if err := x.Netserver("lab-s4c/host1"); err != nil {
				return err
			}
			args := append([]string{"-H", "10.75.0.1"}, patternArgs("256K", "64K")...)
			phaseMark(x, panel, k, c.series)
			r, err := x.MeasurePhase(panel, k, c.series, Flow{From: "lab-s4c/host2", Args: args, Timeline: "from host 2"},
				Flow{From: "lab-s4c/host3", Args: args, Timeline: "from host 3"})
			if err != nil {
				return err
			}
			x.Record(c.series, "from host2", "throughput", Mbit(r[0]), "Mbit/s")
			x.Record(c.series, "from host3", "throughput", Mbit(r[1]), "Mbit/s")
			x.Record(c.series, "sum", "throughput", Mbit(r[0])+Mbit(r[1]), "Mbit/s")
		}
		return nil
	},
	Judge: func(s Samples, sc Scale) Verdict {
		return judge("no control: the 1 Gbit receive link saturates (>= 850); limit: host 2 <= 315 and the sum about 400; with ingress shaping the sum <= 315 (Mbit/s, at scale 1)", []Clause{
			{What: "no control: sum", Value: s.Get("no control", "sum", "throughput"), Op: ">=", Limit: sc.Of(850), Published: sc.Of(1000)},
			{What: "limit: host 2", Value: s.Get("limit", "from host2", "throughput"), Op: "<=", Limit: sc.Of(315), Published: sc.Of(300)},
			{What: "limit: sum", Value: s.Get("limit", "sum", "throughput"), Op: ">=", Limit: sc.Of(330), Published: sc.Of(400)},
			{What: "limit: sum", Value: s.Get("limit", "sum", "throughput"), Op: "<=", Limit: sc.Of(450), Published: sc.Of(400)},
			{What: "limit + shaping: sum", Value: s.Get("limit + ingress shaping", "sum", "throughput"), Op: "<=", Limit: sc.Of(315), Published: sc.Of(300)},
		})
	},
}
