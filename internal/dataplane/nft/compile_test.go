package nft

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/feature"
	"github.com/vnet-project/vnet/internal/plan"
)

func TestCompilePolicy(t *testing.T) {
	pfx := func(s ...string) []netip.Prefix {
		out := []netip.Prefix{}
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	const mac = "02:00:00:00:00:01"
	ips := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.IPv4Unspecified(), netip.IPv6Unspecified()}
	cases := []struct {
		name   string
		p      plan.PortPolicy
		counts map[string]int // rules per chain
		labels []string       // the ingress chain's labels, in order ("" for none)
	}{
		{"forged transmits only", plan.PortPolicy{MAC: mac, GuardMAC: true}, map[string]int{guardChain: 1}, nil},
		{"vSphere defaults", plan.PortPolicy{MAC: mac, GuardMAC: true, UnicastOnly: true},
			map[string]int{guardChain: 1, ingressChain: 1}, []string{labelUnicast}},
		{"ip guard: stacked tags, ARP sender MAC and address, IPv4, IPv6, NA target, ND options",
			// ND options: extension headers, then for RS, NS and NA more
			// than one option and a source or target link-layer option
			plan.PortPolicy{MAC: mac, IPs: ips, GuardIP: true}, map[string]int{guardChain: 7 + 1 + 3*3}, nil},
		{"router advertisements and redirects", plan.PortPolicy{MAC: mac, GuardRA: true}, map[string]int{guardChain: 2}, nil},
		{"acl: preamble in both directions, one rule per family, defaults",
			plan.PortPolicy{MAC: mac, Default: plan.ActionDeny, Rules: []plan.PolicyRule{
				{Allow: true, In: true, Proto: "tcp", DPort: 443},                                  // any family: one rule
				{Allow: true, In: true, Src: pfx("10.0.0.2/32", "10.0.0.3/32", "2001:db8::1/128")}, // a set per family
				{Allow: true, In: true, Src: pfx()},                                                // an empty port group: none
				{Allow: false, In: true, Proto: "icmp", Src: pfx("10.0.0.0/8", "192.168.0.0/16")},  // two prefixes: a rule each
				{Allow: true, Proto: "udp", Dst: pfx("0.0.0.0/0")},
			}},
			map[string]int{ingressChain: 4 + 1 + 2 + 2 + 1, egressChain: 4 + 1 + 1},
			[]string{"", "", "", "", "acl[0]", "acl[1]", "acl[1]", "acl[3]", "acl[3]", labelDefault}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := compilePolicy(c.p)
			if err != nil {
				t.Fatal(err)
			}
			for _, chain := range portChains {
				if len(got[chain]) != c.counts[chain] {
					t.Errorf("%s: %d rules, want %d", chain, len(got[chain]), c.counts[chain])
				}
			}
			if c.labels != nil {
				var labels []string
				for _, r := range got[ingressChain] {
					labels = append(labels, r.label)
				}
				if len(labels) != len(c.labels) {
					t.Fatalf("ingress labels %q, want %q", labels, c.labels)
				}
				for i := range labels {
					if labels[i] != c.labels[i] {
						t.Errorf("ingress labels %q, want %q", labels, c.labels)
						break
					}
				}
			}
		})
	}
	if _, err := compilePolicy(plan.PortPolicy{MAC: "nonsense"}); err == nil {
		t.Error("a bad MAC compiled")
	}
}

func TestCommentsRoundTrip(t *testing.T) {
	for _, s := range []string{"", "acl[3]", "port vn12345678 sha256:0011 rules=12 jumps=3"} {
		r := &nftables.Rule{UserData: comment(s)}
		if got := commentOf(r); got != s {
			t.Errorf("comment %q read back as %q", s, got)
		}
	}
	for _, bad := range [][]byte{{0}, {0, 200, 'x'}, {1, 1}} {
		if got := commentOf(&nftables.Rule{UserData: bad}); got != "" {
			t.Errorf("malformed user data %v read as %q", bad, got)
		}
	}
	port, digest, n := parseJumpComment("port vn1 sha256:ab rules=7 jumps=2")
	if port != "vn1" || digest != "sha256:ab" || n != [2]int{7, 2} {
		t.Errorf("parsed %q %q %v", port, digest, n)
	}
	if port, digest, _ := parseJumpComment("port vn1"); port != "vn1" || digest != "" {
		t.Errorf("a plain jump comment parsed as %q %q", port, digest)
	}
}

func TestMissingBridgeFamilyIsNotSupported(t *testing.T) {
	err := nftErr("vnet.x.esx1", "add table bridge vnet", fmt.Errorf("netlink receive: %w", unix.EAFNOSUPPORT))
	if !errors.Is(err, feature.ErrNotSupported) || !strings.Contains(err.Error(), "CONFIG_NF_TABLES_BRIDGE") {
		t.Errorf("missing bridge family: %v", err)
	}
	if err := nftErr("ns", "x", unix.EPERM); errors.Is(err, feature.ErrNotSupported) {
		t.Errorf("EPERM called unsupported: %v", err)
	}
}
