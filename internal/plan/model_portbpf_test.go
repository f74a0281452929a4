package plan

import (
	"strings"
	"testing"
)

// With the kernel running vnet's port programs, every port policy the
// nftables way has is there as programs on the same port, with the same
// text, and nothing else of the firewall is: no tables, no IP hooks for
// connection tracking. Lab and host models alike.
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
					got[r.NS+"/"+r.Link] = r.Match
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
