package plan

import (
	"fmt"
	"strings"
	"testing"
)

const secBase = `
name: s
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}
  - {name: esx2, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: u1, nics: {esx1: vmnic0, esx2: vmnic0}}]
    portgroups:
      - name: pg-web
        WEB
      - name: pg-app
vms:
  - {name: web, host: esx1, nics: [{portgroup: pg-web, ip: 10.0.0.1/24, mac: "02:00:00:00:00:01"}]}
  - {name: app1, host: esx2, nics: [{portgroup: pg-app, ip: 10.0.0.2/24}]}
  - {name: bare, host: esx2, nics: [{portgroup: pg-app}]}
hostports:
  - {host: esx2, portgroup: pg-app, ip: 10.0.0.100/24}
`

func secModel(t *testing.T, web string, extraVMs ...string) []Resource {
	t.Helper()
	src := strings.Replace(secBase, "WEB", web, 1)
	if web == "" {
		src = strings.Replace(secBase, "        WEB\n", "", 1)
	}
	for _, vm := range extraVMs {
		src = strings.Replace(src, "hostports:", vm+"\nhostports:", 1)
	}
	return Model(load(t, src), Options{})
}

func portSec(rs []Resource, ns, link string) (Resource, bool) {
	for _, r := range rs {
		if r.Kind == KindPortSec && r.NS == ns && r.Link == link {
			return r, true
		}
	}
	return Resource{}, false
}

func TestPortPolicies(t *testing.T) {
	web := VNICPortName("s", "web", 0)
	cases := []struct {
		name string
		pg   string // the YAML under pg-web
		want string // web's port policy text; "" for none
	}{
		{"defaults: vSphere's three rejected", "", "mac 02:00:00:00:00:01 guard mac,ra unicast-only"},
		{"all accepted: no port policy", "security: {promiscuous: true, macChanges: true, forgedTransmits: true, routerAdvertisements: true}", ""},
		{"router advertisements rejected by default", "security: {promiscuous: true, macChanges: true, forgedTransmits: true}", "mac 02:00:00:00:00:01 guard ra"},
		{"router advertisements accepted", "security: {routerAdvertisements: true}", "mac 02:00:00:00:00:01 guard mac unicast-only"},
		{"promiscuous alone turns unicast filtering off", "security: {promiscuous: true}", "mac 02:00:00:00:00:01 guard mac,ra"},
		{"mac changes accepted: the MAC a guest sets is unknown", "security: {macChanges: true}", "mac 02:00:00:00:00:01 guard mac,ra"},
		{"ip spoofing rejected", "security: {ipSpoofing: false}",
			"mac 02:00:00:00:00:01 ip 10.0.0.1,0.0.0.0,::,fe80::ff:fe00:1 guard mac,ip,ra unicast-only"},
		{"acl with a port group and prefixes", `acl:
          default: deny
          rules:
            - {action: allow, direction: ingress, proto: tcp, dport: 443, from: 0.0.0.0/0}
            - {action: allow, direction: ingress, proto: tcp, dport: 5432, from: {portgroup: pg-app}}
            - {action: deny, direction: egress, proto: udp, sport: 53, to: 10.0.0.0/8}`,
			"mac 02:00:00:00:00:01 guard mac,ra unicast-only acl deny; allow in tcp dport 443 from 0.0.0.0/0; " +
				"allow in tcp dport 5432 from 10.0.0.2,10.0.0.100; deny out udp sport 53 to 10.0.0.0/8"},
		{"acl default allow", "acl: {rules: [{action: deny, direction: egress, proto: icmp}]}",
			"mac 02:00:00:00:00:01 guard mac,ra unicast-only acl allow; deny out icmp"},
		{"empty acl is no acl", "acl: {default: allow}", "mac 02:00:00:00:00:01 guard mac,ra unicast-only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs := secModel(t, c.pg)
			r, ok := portSec(rs, NSName("s", "esx1"), web)
			switch {
			case c.want == "" && ok:
				t.Fatalf("want no port policy, got %s", r)
			case c.want == "":
				return
			case !ok:
				t.Fatalf("no port policy for web's port %s", web)
			case r.Match != c.want:
				t.Errorf("policy\n got %s\nwant %s", r.Match, c.want)
			}
			p, err := ParsePortPolicy(r.Match)
			if err != nil {
				t.Fatal(err)
			}
			if p.String() != r.Match {
				t.Errorf("text does not survive a round trip:\n %s\n %s", r.Match, p)
			}
		})
	}
}

func TestFirewallPerHostAndConntrack(t *testing.T) {
	acl := "acl: {default: deny}"
	rs := secModel(t, acl)
	fw := map[string]string{}
	sysctls := map[string]string{}
	for _, r := range rs {
		switch r.Kind {
		case KindFirewall:
			fw[r.NS] = r.Match
		case KindNetns:
			sysctls[r.Name] = r.Sysctls
		}
	}
	esx1, esx2 := NSName("s", "esx1"), NSName("s", "esx2")
	if fw[esx1] != FirewallStateful || fw[esx2] != FirewallBridge || len(fw) != 2 {
		t.Errorf("firewalls %v: want esx1 stateful (its port has an ACL), esx2 bridge only", fw)
	}
	if v := SysctlValues(sysctls[esx1]); v[ConntrackSysctlV4] != "1" || v[ConntrackSysctlV6] != "1" {
		t.Errorf("esx1 sysctls %s: the IP hooks must see bridged traffic for conntrack", sysctls[esx1])
	}
	if v := SysctlValues(sysctls[esx2]); v[ConntrackSysctlV4] != "0" {
		t.Errorf("esx2 sysctls %s: no ACL, no IP hooks", sysctls[esx2])
	}
	// Host ports are ports too.
	if _, ok := portSec(rs, esx2, hostPortPeerName("vmk0")); !ok {
		t.Error("the host port has no port policy")
	}
	// All accepted everywhere: no firewall at all, as before port security.
	all := "security: {promiscuous: true, macChanges: true, forgedTransmits: true, routerAdvertisements: true}"
	open := Model(load(t, strings.NewReplacer("WEB", all, "- name: pg-app\n", "- name: pg-app\n        "+all+"\n").Replace(secBase)), Options{})
	for _, r := range open {
		if r.Kind == KindFirewall || r.Kind == KindPortSec {
			t.Errorf("all accepted, yet %s", r)
		}
	}
}

// A rule naming a port group follows its members: a new VM there changes
// the rule's addresses, and Diff changes the policy in place.
func TestPortGroupRuleFollowsMembers(t *testing.T) {
	acl := "acl: {default: deny, rules: [{action: allow, direction: ingress, from: {portgroup: pg-app}}]}"
	before := secModel(t, acl)
	after := secModel(t, acl, "  - {name: app2, host: esx1, nics: [{portgroup: pg-app, ip: 10.0.0.3/24}]}")
	p := Diff(after, before)
	var changed, created []string
	for _, a := range p.Actions {
		switch {
		case a.Op == OpModify && a.Subject().Kind == KindPortSec:
			changed = append(changed, a.String())
		case a.Op == OpCreate && a.Subject().Kind == KindPortSec:
			created = append(created, a.New.Link)
		case a.Op == OpDelete || a.Op == OpReplace:
			t.Errorf("unexpected %s", a)
		}
	}
	if len(changed) != 1 || !strings.Contains(changed[0], "from 10.0.0.2,10.0.0.3,10.0.0.100") {
		t.Errorf("changes %q: want web's policy to gain 10.0.0.3", changed)
	}
	if len(created) != 1 || created[0] != VNICPortName("s", "app2", 0) {
		t.Errorf("created policies %v: want app2's port", created)
	}
	if !Diff(after, after).Empty() {
		t.Error("a second diff is not empty")
	}
}

func TestPortPolicyParseErrors(t *testing.T) {
	for _, text := range []string{
		"",
		"guard mac",
		"mac 02:00:00:00:00:01 guard nothing",
		"mac 02:00:00:00:00:01 acl maybe",
		"mac 02:00:00:00:00:01 ip 10.0.0.300",
		"mac 02:00:00:00:00:01; permit in",
		"mac 02:00:00:00:00:01; allow in dport",
		"mac 02:00:00:00:00:01; allow in from 10.0.0.0/33",
	} {
		if _, err := ParsePortPolicy(text); err == nil {
			t.Errorf("%q parsed", text)
		}
	}
}

func TestLinkLocal(t *testing.T) {
	ll, ok := LinkLocal("52:54:00:12:34:56")
	if !ok || ll.String() != "fe80::5054:ff:fe12:3456" {
		t.Errorf("LinkLocal = %s, %v", ll, ok)
	}
}

func TestPortSecDigestResolves(t *testing.T) {
	rs := secModel(t, "")
	r, _ := portSec(rs, NSName("s", "esx1"), VNICPortName("s", "web", 0))
	seen := r
	seen.Match = SteerDigest(r.Match)
	got := ResolveSteer([]Resource{seen}, rs)
	if got[0].Match != r.Match {
		t.Errorf("digest not resolved: %s", got[0].Match)
	}
}

func TestLongPolicyIsShortInPlans(t *testing.T) {
	var rules []string
	for i := range 200 {
		rules = append(rules, fmt.Sprintf("{action: deny, direction: ingress, proto: udp, dport: %d}", 20000+i))
	}
	rs := secModel(t, "acl: {default: deny, rules: ["+strings.Join(rules, ", ")+"]}")
	r, _ := portSec(rs, NSName("s", "esx1"), VNICPortName("s", "web", 0))
	if s := r.String(); len(s) > 400 || !strings.Contains(s, "(200 rules in all, sha256:") {
		t.Errorf("a 200-rule policy prints as %d bytes: %.300s", len(s), s)
	}
	small, _ := portSec(secModel(t, ""), NSName("s", "esx1"), VNICPortName("s", "web", 0))
	if !strings.Contains(small.String(), small.Match) {
		t.Errorf("a short policy is cut: %s", small)
	}
}

func TestDualStackNetworkVNICMayUseBothAddresses(t *testing.T) {
	s := mustLoad(t, `name: ds
hosts: [{name: hv1}]
networks:
  - {name: web, subnet: 10.1.0.0/24, subnet6: "fd00:1::/64", security: {ipSpoofing: false}}
vms:
  - {name: a, host: hv1, nics: [{network: web, ip: 10.1.0.11/24, ip6: "fd00:1::11/64"}]}
`)
	for _, r := range Model(s, Options{}) {
		if r.Kind != KindPortSec {
			continue
		}
		for _, want := range []string{"10.1.0.11", "fd00:1::11"} {
			if !strings.Contains(r.Match, want) {
				t.Errorf("a's policy %q does not let it use %s", r.Match, want)
			}
		}
		return
	}
	t.Fatal("a's vNIC has no port policy")
}
