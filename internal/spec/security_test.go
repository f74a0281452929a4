package spec

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// secSpec is a valid infrastructure whose first port group gets the YAML
// block under test (indented under it) on line 9.
func secSpec(block string) string {
	return `name: sec
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: sw0
    uplinks: [{name: u1, nics: {esx1: vmnic0}}]
    portgroups:
      - name: pg-web
` + indent(block, "        ") + `
      - name: pg-app
vms:
  - {name: web, host: esx1, nics: [{portgroup: pg-web, ip: 10.0.0.1/24}]}
  - {name: app, host: esx1, nics: [{portgroup: pg-app, ip: 10.0.0.2/24}]}
`
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = by + lines[i]
	}
	return strings.Join(lines, "\n")
}

func TestSecurityDecodesAndDefaults(t *testing.T) {
	doc, err := Load("t.yaml", []byte(secSpec(`
security: {promiscuous: true, ipSpoofing: false}
acl:
  default: deny
  rules:
    - {action: allow, direction: ingress, proto: tcp, dport: 443, from: 0.0.0.0/0}
    - {action: allow, direction: ingress, proto: tcp, dport: 5432, from: {portgroup: pg-app}}
    - {action: allow, direction: egress, to: 10.0.0.0/8}
    - {action: deny, direction: egress, proto: icmpv6, to: "2001:db8::1"}`)))
	if err != nil {
		t.Fatal(err)
	}
	web, _, _ := doc.Spec.PortGroup("pg-web")
	if got, want := web.EffectiveSecurity(), (SecurityPolicy{Promiscuous: true}); got != want {
		t.Errorf("pg-web security %+v, want %+v", got, want)
	}
	app, _, _ := doc.Spec.PortGroup("pg-app")
	if got, want := app.EffectiveSecurity(), (SecurityPolicy{IPSpoofing: true}); got != want {
		t.Errorf("defaults %+v, want %+v (vSphere's: the three rejected, no IP check)", got, want)
	}
	rules := web.ACL.Rules
	if rules[0].From.CIDR != "0.0.0.0/0" || rules[1].From.PortGroup != "pg-app" || rules[2].To.CIDR != "10.0.0.0/8" {
		t.Errorf("peers decoded as %+v %+v %+v", rules[0].From, rules[1].From, rules[2].To)
	}
	if !web.HasACL() || app.HasACL() {
		t.Errorf("HasACL: pg-web %v, pg-app %v", web.HasACL(), app.HasACL())
	}
	if got := fmt.Sprint(doc.Spec.PortGroupMembers("pg-app")); got != "[10.0.0.2]" {
		t.Errorf("pg-app members %s", got)
	}
	if p, _ := rules[3].To.Prefix(); p.String() != "2001:db8::1/128" {
		t.Errorf("an address alone is its own prefix, got %s", p)
	}
}

func TestSecurityValidation(t *testing.T) {
	cases := []struct {
		name, block, path, msg string
		line                   int
	}{
		{"default", "acl: {default: reject}", "switches[0].portgroups[0].acl.default", `default "reject": want allow or deny`, 9},
		{"no action", "acl:\n  rules:\n    - {direction: ingress}", "switches[0].portgroups[0].acl.rules[0].action", "needs an action", 11},
		{"bad action", "acl:\n  rules:\n    - {action: permit, direction: ingress}", "switches[0].portgroups[0].acl.rules[0].action", `action "permit"`, 11},
		{"direction", "acl:\n  rules:\n    - {action: allow, direction: inbound}", "switches[0].portgroups[0].acl.rules[0].direction", `direction "inbound"`, 11},
		{"proto", "acl:\n  rules:\n    - {action: allow, direction: ingress, proto: sctp}", "switches[0].portgroups[0].acl.rules[0].proto", `proto "sctp"`, 11},
		{"port without proto", "acl:\n  rules:\n    - {action: allow, direction: ingress, dport: 80}", "switches[0].portgroups[0].acl.rules[0].dport", "needs proto: tcp or udp", 11},
		{"port range", "acl:\n  rules:\n    - {action: allow, direction: ingress, proto: udp, sport: 70000}", "switches[0].portgroups[0].acl.rules[0].sport", "outside 1..65535", 11},
		{"bad prefix", "acl:\n  rules:\n    - {action: allow, direction: ingress, from: 10.0.0.300/8}", "switches[0].portgroups[0].acl.rules[0].from", "is not a prefix or an address", 11},
		{"unknown port group", "acl:\n  rules:\n    - {action: allow, direction: ingress, from: {portgroup: pg-db}}", "switches[0].portgroups[0].acl.rules[0].from.portgroup", `unknown port group "pg-db"`, 11},
		{"family clash", "acl:\n  rules:\n    - {action: allow, direction: ingress, proto: icmp, from: \"2001:db8::/32\"}", "switches[0].portgroups[0].acl.rules[0].from", "is IPv6, but the rule is IPv4", 11},
		{"ends clash", "acl:\n  rules:\n    - {action: allow, direction: ingress, from: 10.0.0.0/8, to: \"::/0\"}", "switches[0].portgroups[0].acl.rules[0].to", "is IPv6, but the rule is IPv4", 11},
		{"empty peer", "acl:\n  rules:\n    - {action: allow, direction: ingress, from: {}}", "switches[0].portgroups[0].acl.rules[0].from", "a peer needs a prefix", 11},
		{"security type", "security: {promiscuous: maybe}", "switches[0].portgroups[0].security.promiscuous", "want a boolean", 9},
		{"security unknown field", "security: {forgedTransmit: false}", "switches[0].portgroups[0].security.forgedTransmit", `did you mean "forgedTransmits"`, 9},
		{"peer list", "acl:\n  rules:\n    - {action: allow, direction: ingress, from: [10.0.0.0/8]}", "switches[0].portgroups[0].acl.rules[0].from", "want a single value", 11},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load("t.yaml", []byte(secSpec(c.block)))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("not ErrInvalid: %v", err)
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
