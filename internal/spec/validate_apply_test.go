package spec

import (
	"strings"
	"testing"
)

// Names and addresses that only an apply would find wrong, on some host,
// at some later time, are refused by validation: a link named as vnet
// names its own, an IPv4 address written as IPv6.
func TestApplyTimeFailuresAreRefused(t *testing.T) {
	const base = `name: t
hosts:
  - {name: esx1, underlay: 192.0.2.1, nics: [{name: vmnic0, speed: 1Gbit}]}
  - {name: esx2, underlay: 192.0.2.2, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - {name: sw0, uplinks: [{name: up1, nics: {esx1: vmnic0, esx2: vmnic0}}], portgroups: [{name: pg}]}
networks:
  - {name: n1, subnet: 10.9.0.0/24, gateway: 10.9.0.1, router: r1}
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg, ip: 10.0.0.1/24}, {network: n1, ip: 10.9.0.5/24}]}
hostports:
  - {host: esx1, portgroup: pg, ip: 10.0.0.2/24}
`
	for _, tc := range []struct{ name, from, to, want string }{
		{"nic like a vNIC's port", "{name: vmnic0, speed: 1Gbit}]}\n  - {name: esx2", "{name: vn1a2b3c4d, speed: 1Gbit}]}\n  - {name: esx2",
			`hosts[0].nics[0].name: name "vn1a2b3c4d" has the form of the links vnet names itself`},
		{"switch like a host's bridge", "{name: sw0,", "{name: vs00ff00ff,", `switches[0].name: name "vs00ff00ff" has the form`},
		{"host port like its switch port", "ip: 10.0.0.2/24}", "ip: 10.0.0.2/24, name: vk12345678}", `hostports[0].name: name "vk12345678" has the form`},
		{"nic like the underlay link", "{name: vmnic0, speed: 1Gbit}]}\n  - {name: esx2", "{name: vnet-underlay, speed: 1Gbit}]}\n  - {name: esx2",
			`hosts[0].nics[0].name: name "vnet-underlay" has the form`},
		{"mapped host port", "ip: 10.0.0.2/24}", "ip: \"::ffff:10.0.0.1/120\"}",
			`hostports[0].ip: ::ffff:10.0.0.1 is an IPv4 address written as IPv6 (IPv4-mapped): write it as 10.0.0.1`},
		{"mapped vNIC", "ip: 10.0.0.1/24}", "ip: \"::ffff:10.0.0.7/120\"}", `vms[0].nics[0].ip: ::ffff:10.0.0.7 is an IPv4 address written as IPv6`},
		{"mapped network vNIC", "ip: 10.9.0.5/24}", "ip6: \"::ffff:10.9.0.5/120\"}", `vms[0].nics[1].ip6: ::ffff:10.9.0.5 is an IPv4 address written as IPv6`},
		{"mapped underlay", "underlay: 192.0.2.1,", "underlay: \"::ffff:192.0.2.1\",", `hosts[0].underlay: ::ffff:192.0.2.1 is an IPv4 address written as IPv6`},
		{"mapped gateway", "gateway: 10.9.0.1,", "gateway: \"::ffff:10.9.0.1\",", `networks[0].gateway: ::ffff:10.9.0.1 is an IPv4 address written as IPv6`},
		{"mapped subnet", "subnet: 10.9.0.0/24,", "subnet: \"::ffff:10.9.0.0/120\",", `networks[0].subnet: ::ffff:10.9.0.0 is an IPv4 address written as IPv6`},
		{"mapped peer", "portgroups: [{name: pg}]", "portgroups: [{name: pg, acl: {rules: [{action: allow, direction: ingress, from: \"::ffff:10.0.0.0/104\"}]}}]",
			`switches[0].portgroups[0].acl.rules[0].from: ::ffff:10.0.0.0 is an IPv4 address written as IPv6`},
		{"seven hex digits", "{name: sw0,", "{name: vs00ff00f,", ""},
		{"upper-case hex", "{name: sw0,", "{name: vs00FF00FF,", ""},
		{"a longer name", "{name: sw0,", "{name: vs00ff00ff0,", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(base, tc.from) {
				t.Fatalf("the base spec has no %q", tc.from)
			}
			_, err := Load("t.yaml", []byte(strings.Replace(base, tc.from, tc.to, 1)))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "(line ")):
				t.Errorf("got %v, want %q with its line", err, tc.want)
			}
		})
	}
}

// Ports of one switch whose subnets overlap without being the same are
// warned about; the same subnet, or subnets on different switches, are
// not.
func TestOverlappingSubnetsWarn(t *testing.T) {
	const base = `name: t
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - {name: sw0, uplinks: [{name: up1, nics: {esx1: vmnic0}}], portgroups: [{name: pg}, {name: pg2}]}
  - {name: sw1, hosts: [esx1], portgroups: [{name: pg3}]}
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg, ip: 10.0.0.1/24}]}
  - {name: vm2, host: esx1, nics: [{portgroup: PG, ip: IP}]}
`
	for _, tc := range []struct{ pg, ip, want string }{
		{"pg", "10.0.0.2/24", ""},
		{"pg2", "10.0.0.2/24", ""},
		{"pg3", "10.0.0.2/16", ""},
		{"pg", "10.0.0.2/16", "vms[1].nics[0].ip: subnet 10.0.0.0/16 overlaps 10.0.0.0/24 (vms[0].nics[0].ip) on switch sw0: the two disagree on which addresses are on the link, so some of their traffic would not cross the switch (line 9:"},
		{"pg2", "10.0.0.130/25", "vms[1].nics[0].ip: subnet 10.0.0.128/25 overlaps 10.0.0.0/24"},
		{"pg", "10.0.1.2/24", ""},
	} {
		doc, err := Load("t.yaml", []byte(strings.NewReplacer("PG", tc.pg, "IP", tc.ip).Replace(base)))
		if err != nil {
			t.Fatal(err)
		}
		ws := Warnings(doc)
		switch {
		case tc.want == "" && len(ws) > 0:
			t.Errorf("%s on %s: warned %v", tc.ip, tc.pg, ws)
		case tc.want != "" && (len(ws) != 1 || !strings.Contains(ws.Error(), tc.want)):
			t.Errorf("%s on %s: warned %v, want %q", tc.ip, tc.pg, ws, tc.want)
		}
	}
}
