package plan

import (
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// With the kernel running vnet's port programs, every port policy the
// nftables way has is there as programs on the same port, the same policy
// with the port's bridge, and nothing else of the firewall is: no tables,
// no IP hooks for connection tracking. Lab and host models alike.
func TestPortProgramsReplaceTheFirewall(t *testing.T) {
	for _, c := range []struct {
		name string
		src  string
		opt  Options
	}{
		{"lab", strings.Replace(secBase, "WEB", "acl: {default: deny, rules: [{action: allow, direction: ingress, proto: tcp, dport: 80}]}", 1), Options{}},
		{"host hv1", hostSecSpec, Options{Host: "hv1"}},
		{"host hv2", hostSecSpec, Options{Host: "hv2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := loadText(t, c.src)
			nft := Model(s, c.opt)
			c.opt.PortPrograms = true
			progs := Model(s, c.opt)
			want := map[string]string{}
			for _, r := range nft {
				if r.Kind == KindPortSec {
					want[r.NS+"/"+r.Link] = r.Match
				}
			}
			if len(want) == 0 {
				t.Fatal("no port policies to compare")
			}
			got := map[string]string{}
			for _, r := range progs {
				switch r.Kind {
				case KindPortBPF:
					p, err := ParsePortPolicy(r.Match)
					if err != nil {
						t.Fatal(err)
					}
					if p.Switch == "" {
						t.Errorf("%s/%s: no bridge in %q", r.NS, r.Link, r.Match)
					}
					p.Switch, p.Direct = "", false
					got[r.NS+"/"+r.Link] = p.String()
				case KindPortSec, KindFirewall:
					t.Errorf("with port programs the model has %s", r)
				case KindNetns:
					if v := SysctlValues(r.Sysctls); v[ConntrackSysctlV4] == "1" || v[ConntrackSysctlV6] == "1" {
						t.Errorf("%s passes bridged traffic to the IP hooks", r.Name)
					}
				}
			}
			for k, m := range want {
				if got[k] != m {
					t.Errorf("%s: programs %q, want %q", k, got[k], m)
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d port programs, %d policies the nftables way", len(got), len(want))
			}
		})
	}
}

// Port programs sit on their port: replaced with it, and a change of
// policy is made in place.
func TestPortProgramsAreOnTheirPort(t *testing.T) {
	r := Resource{Kind: KindPortBPF, NS: "ns", Link: "vn1", Match: "mac 02:00:00:00:00:01 guard mac"}
	if r.onLink() != "ns/vn1" || r.Key() != "portbpf/ns/vn1" {
		t.Errorf("onLink %q key %q", r.onLink(), r.Key())
	}
	d := r
	d.Match += ",ra"
	if p := Diff([]Resource{d}, []Resource{r}); len(p.Actions) != 1 || p.Actions[0].Op != OpModify {
		t.Errorf("a changed policy: %s", p)
	}
	digest := r
	digest.Match = SteerDigest(r.Match)
	if got := ResolveSteer([]Resource{digest}, []Resource{r}); got[0].Match != r.Match {
		t.Errorf("the digest read back resolves to %q", got[0].Match)
	}
}

// Frames for a vNIC's MAC go past the bridge only to a connected veth
// whose policy filters by that MAC and refuses MAC changes, with nothing
// between the bridge and the VM: no shaper, GRO setting or load balancers.
func TestPortDirect(t *testing.T) {
	off, on := false, true
	filtered := PortPolicy{MAC: "02:00:00:00:00:01", UnicastOnly: true}
	for _, c := range []struct {
		name       string
		nic        spec.VNIC
		p          PortPolicy
		shaped     bool
		macChanges bool
		balanced   bool
		want       bool
	}{
		{"connected veth", spec.VNIC{}, filtered, false, false, false, true},
		{"cut from the switch", spec.VNIC{Connected: &off}, filtered, false, false, false, false},
		{"explicitly connected", spec.VNIC{Connected: &on}, filtered, false, false, false, true},
		{"a TAP", spec.VNIC{Attach: &spec.Attach{Tap: "tap0"}}, filtered, false, false, false, false},
		{"no MAC filtered", spec.VNIC{}, PortPolicy{}, false, false, false, false},
		{"MAC changes allowed", spec.VNIC{}, filtered, false, true, false, false},
		{"shaped toward the VM", spec.VNIC{}, filtered, true, false, false, false},
		{"a load balancers' client", spec.VNIC{}, filtered, false, false, true, false},
		{"segments for the vNIC's GRO", spec.VNIC{Offloads: &spec.Offloads{GRO: &on}}, filtered, false, false, false, false},
	} {
		if got := PortDirect(&c.nic, c.p, c.shaped, c.macChanges, c.balanced); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// The port's bridge and its taking frames directly survive the policy's
// text.
func TestPortPolicySwitchRoundTrip(t *testing.T) {
	text := "mac 02:00:00:00:00:01 guard mac unicast-only switch br0 direct"
	p, err := ParsePortPolicy(text)
	if err != nil {
		t.Fatal(err)
	}
	if p.Switch != "br0" || !p.Direct || p.String() != text {
		t.Errorf("%q: switch %q direct %v, text %q", text, p.Switch, p.Direct, p.String())
	}
}

// A load balancers' client port takes no frames past the bridge; a port
// without load balancers on the same kind of network does.
func TestBalancedPortsAreNotDirect(t *testing.T) {
	s := loadLBSpec(t)
	lbPort := map[string]bool{}
	progs := Model(s, Options{PortPrograms: true})
	for _, r := range progs {
		if r.Kind == KindLB {
			lbPort[r.NS+"/"+r.Link] = true
		}
	}
	if len(lbPort) == 0 {
		t.Fatal("no load balancers' client port")
	}
	var direct int
	for _, r := range progs {
		if r.Kind != KindPortBPF {
			continue
		}
		p, err := ParsePortPolicy(r.Match)
		if err != nil {
			t.Fatal(err)
		}
		if p.Direct && lbPort[r.NS+"/"+r.Link] {
			t.Errorf("%s/%s: a client of load balancers takes frames directly", r.NS, r.Link)
		}
		if p.Direct {
			direct++
		}
	}
	t.Logf("%d client ports, %d taking frames directly", len(lbPort), direct)
}

// A paused VM's ports take no frames past the bridge: their switch ends
// are down, and a frame handed past the bridge would still reach the VM.
func TestPausedPortsAreNotDirect(t *testing.T) {
	doc, err := spec.Load("t.yaml", []byte(`name: pz
hosts: [{name: esx1}]
switches:
  - {name: sw0, hosts: [esx1], portgroups: [{name: pg}]}
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg, ip: 10.0.0.1/24}]}
  - {name: vm2, host: esx1, nics: [{portgroup: pg, ip: 10.0.0.2/24}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := doc.Spec
	directOf := func(o Options) map[string]bool {
		out := map[string]bool{}
		for _, r := range Model(s, o) {
			if r.Kind != KindPortBPF {
				continue
			}
			p, err := ParsePortPolicy(r.Match)
			if err != nil {
				t.Fatal(err)
			}
			out[r.Link] = p.Direct
		}
		return out
	}
	running := directOf(Options{PortPrograms: true})
	checked := 0
	for _, vm := range s.VMs {
		paused := directOf(Options{PortPrograms: true, Paused: Paused{}.With(PauseVM(vm.Name))})
		for i := range vm.NICs {
			port := VNICPortName("pz", vm.Name, i)
			if running[port] {
				checked++
			}
			if paused[port] {
				t.Errorf("vm %s eth%d paused: its port takes frames past the bridge", vm.Name, i)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no port took frames directly while running: nothing was checked")
	}
}
