package spec

import (
	"errors"
	"strings"
	"testing"
)

// netSecSpec has a network with security and an ACL naming a network, a
// port group and a prefix; each case replaces one part.
const netSecSpec = `name: dc
hosts:
  - {name: hv1, underlay: 10.0.0.11}
  - {name: hv2, underlay: 10.0.0.12}
switches:
  - name: dvs
    hosts: [hv1, hv2]
    portgroups: [{name: pg}]
networks:
  - name: a-web
    subnet: 10.1.0.0/24
    security: {forgedTransmits: false, ipSpoofing: false}
    acl:
      default: deny
      rules:
        - {action: allow, direction: ingress, proto: tcp, dport: 80, from: {network: a-db}}
        - {action: allow, direction: ingress, from: {portgroup: pg}}
        - {action: allow, direction: egress, to: 10.2.0.0/24}
  - {name: a-db, subnet: 10.2.0.0/24}
vms:
  - {name: a1, host: hv1, nics: [{network: a-web, ip: 10.1.0.11/24}]}
  - {name: a2, host: hv2, nics: [{network: a-db, ip: 10.2.0.12/24}]}
`

func TestNetworkSecurityValid(t *testing.T) {
	doc, err := Load("t.yaml", []byte(netSecSpec))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := doc.Spec.Network("a-web")
	sec := n.EffectiveSecurity()
	if sec.ForgedTransmits || sec.IPSpoofing || sec.Promiscuous || sec.MACChanges || sec.RouterAdvertisements {
		t.Errorf("a-web's policy %+v: all rejected", sec)
	}
	if !n.HasACL() || n.ACL.Rules[0].From.Network != "a-db" {
		t.Errorf("a-web's ACL %+v", n.ACL)
	}
	db, _ := doc.Spec.Network("a-db")
	if got := db.EffectiveSecurity(); got != (SecurityPolicy{IPSpoofing: true}) {
		t.Errorf("a network without security: %+v, want a port group's defaults", got)
	}
	if db.HasACL() {
		t.Error("a network without acl filters nothing")
	}
	if got := doc.Spec.NetworkMembers("a-db"); len(got) != 1 || got[0].String() != "10.2.0.12" {
		t.Errorf("a-db's members %v", got)
	}
}

func TestNetworkSecurityValidation(t *testing.T) {
	cases := []struct {
		name, old, new, path, msg string
		line                      int
	}{
		{"unknown network peer", "{network: a-db}", "{network: a-app}", "networks[0].acl.rules[0].from.network", `unknown network "a-app"`, 16},
		{"network and port group", "{network: a-db}", "{network: a-db, portgroup: pg}", "networks[0].acl.rules[0].from", "one of a prefix", 16},
		{"unknown port group peer", "{portgroup: pg}", "{portgroup: pg2}", "networks[0].acl.rules[1].from.portgroup", `unknown port group "pg2"`, 17},
		{"bad action", "action: allow, direction: egress", "action: permit, direction: egress", "networks[0].acl.rules[2].action", "want allow or deny", 18},
		{"bad default", "default: deny", "default: drop", "networks[0].acl.default", "want allow or deny", 14},
		{"port without proto", "proto: tcp, dport: 80", "dport: 80", "networks[0].acl.rules[0].dport", "needs proto", 16},
		{"family", "to: 10.2.0.0/24", "to: \"2001:db8::/32\", proto: icmp", "networks[0].acl.rules[2].to", "is IPv6, but the rule is IPv4", 18},
		{"security field", "forgedTransmits: false", "forgedTransmit: false", "networks[0].security.forgedTransmit", "", 12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(netSecSpec, c.old) {
				t.Fatalf("spec has no %q", c.old)
			}
			src := strings.Replace(netSecSpec, c.old, c.new, 1)
			_, err := Load("t.yaml", []byte(src))
			if err == nil {
				t.Fatalf("accepted:\n%s", src)
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("not Errors: %v", err)
			}
			for _, e := range es {
				if e.Path == c.path && strings.Contains(e.Msg, c.msg) {
					if e.Pos.Line != c.line {
						t.Errorf("%s at line %d, want %d", e.Path, e.Pos.Line, c.line)
					}
					return
				}
			}
			t.Errorf("got\n%v\nwant %s: ...%s...", err, c.path, c.msg)
		})
	}
}
