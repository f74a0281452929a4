package lab

import "time"

// s3Relink is S3's other finding: ESX links a running VM's vNIC to another
// physical NIC, and unlinks and relinks it, while the VM runs; Xen had to
// power the VM off. Here a TCP stream runs through vNIC eth1 while it is
// moved to another port group (another switch and NIC) and back, then while
// it is cut and connected again.
var s3Relink = &Experiment{
	Name: "s3-relink", Study: "S3", Title: "relink and unlink a running VM's vNIC",
	Published: "ESX can link and unlink a vNIC to a physical NIC while the VM runs; Xen must power the VM off.",
	Scaling:   "testbed examples/s3-multi-nic.yaml: eth1 moves from net1 (vmnic1) to net2 (vmnic2) and back; one physical switch, so its peer stays reachable",
	Needs:     Needs{Lines: []float64{1000}, RateFree: true},
	Baselines: func(s Samples, sc Scale) []Baseline {
		return []Baseline{{What: "eth1 linked", Got: s.Get("eth1", "linked", "throughput"), Line: sc.Of(1000)}}
	},
	Chart: Chart{Metric: "throughput", YLabel: "eth1 stream, Mbit/s"},
	Run: func(x *Run) error {
		tb, err := exampleTestbed("s3-multi-nic.yaml", "s3", "lab-s3r", x.Scale)
		if err != nil {
			return err
		}
		if err := x.Apply("lab-s3r", tb); err != nil {
			return err
		}
		if err := x.Netserver("lab-s3r/peer"); err != nil {
			return err
		}
		nsBefore, err := x.NetnsOf("lab-s3r/vm")
		if err != nil {
			return err
		}
		secs := max(6, 3*x.Seconds())
		third := time.Duration(secs) * time.Second / 3
		flow := Flow{From: "lab-s3r/vm", Args: append([]string{"-H", "10.30.1.100"}, patternArgs("64K", "8K")...), Secs: secs}
		base, err := x.Measure("eth1 on net1", flow)
		if err != nil {
			return err
		}
		x.Record("eth1", "linked", "throughput", Mbit(base[0]), "Mbit/s")
		link := func(pg string) []string { return []string{"link", "--infra", "lab-s3r", "vm", "eth1", pg} }
		moved, err := x.MeasureWhile("eth1 moved to net2 and back", flow, Action{At: third, Args: link("net2")}, Action{At: 2 * third, Args: link("net1")})
		if err != nil {
			return err
		}
		x.Record("eth1", "relinked twice", "throughput", Mbit(moved), "Mbit/s")
		cut, err := x.MeasureWhile("eth1 unlinked and linked", flow,
			Action{At: third, Args: []string{"unlink", "--infra", "lab-s3r", "vm", "eth1"}}, Action{At: 2 * third, Args: link("net1")})
		if err != nil {
			return err
		}
		x.Record("eth1", "cut for a third", "throughput", Mbit(cut), "Mbit/s")
		nsAfter, err := x.NetnsOf("lab-s3r/vm")
		if err != nil {
			return err
		}
		same := 0.0
		if nsAfter == nsBefore {
			same = 1
		}
		x.Record("vm", "namespace kept", "kept", same, "bool")
		return nil
	},
	Judge: func(s Samples, sc Scale) Verdict {
		base := s.Get("eth1", "linked", "throughput")
		return judge("a stream through a vNIC relinked twice keeps >= 90% of its rate, one cut for a third of the time resumes (>= 40% overall), and the VM is not recreated", []Clause{
			{What: "relinked twice / linked", Value: ratio(s.Get("eth1", "relinked twice", "throughput"), base), Op: ">=", Limit: 0.9, Published: 1},
			{What: "cut for a third / linked", Value: ratio(s.Get("eth1", "cut for a third", "throughput"), base), Op: ">=", Limit: 0.4},
			{What: "VM namespace kept (1 = yes)", Value: s.Get("vm", "namespace kept", "kept"), Op: ">=", Limit: 1, Published: 1},
		})
	},
}
