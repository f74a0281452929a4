package etcdstore

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/status"
)

func TestCompactSecurity(t *testing.T) {
	port := func(name string, c map[string]uint64) status.PortSecurity {
		return status.PortSecurity{Port: name, PortGroup: "pg", Link: "vn" + name, Policy: "mac", Counters: c}
	}
	cases := []struct {
		name        string
		in          []status.PortSecurity
		max         int
		want        []string // port: counters, as kept
		wantOmitted int
	}{
		{name: "none", in: nil, want: nil},
		{name: "zeros left out, ports kept",
			in:   []status.PortSecurity{port("b", map[string]uint64{"forged-mac": 3, "ra-guard": 0}), port("a", map[string]uint64{"forged-mac": 0})},
			want: []string{"a: map[]", "b: map[forged-mac:3]"}},
		{name: "bound keeps ports that counted, by port",
			in: []status.PortSecurity{port("a", nil), port("b", map[string]uint64{"acl[0]": 1}), port("c", nil),
				port("d", map[string]uint64{"acl-default": 2}), port("e", map[string]uint64{"acl[1]": 0})},
			max: 3, want: []string{"a: map[]", "b: map[acl[0]:1]", "d: map[acl-default:2]"}, wantOmitted: 2},
		{name: "bound with every port counting",
			in:  []status.PortSecurity{port("c", map[string]uint64{"x": 1}), port("b", map[string]uint64{"x": 1}), port("a", map[string]uint64{"x": 1})},
			max: 2, want: []string{"a: map[x:1]", "b: map[x:1]"}, wantOmitted: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := fmt.Sprint(c.in)
			got, omitted := CompactSecurity(c.in, c.max)
			var gotText []string
			for _, p := range got {
				gotText = append(gotText, fmt.Sprintf("%s: %v", p.Port, p.Counters))
			}
			if !reflect.DeepEqual(gotText, c.want) || omitted != c.wantOmitted {
				t.Errorf("got %v, %d omitted; want %v, %d", gotText, omitted, c.want, c.wantOmitted)
			}
			if fmt.Sprint(c.in) != before {
				t.Errorf("changed its input: %s, was %s", fmt.Sprint(c.in), before)
			}
		})
	}
}

// A report without counters encodes as before; one with them carries
// each port's non-zero counters and decodes to what was sent.
func TestReportEncoding(t *testing.T) {
	at := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	plain, _ := json.Marshal(Report{Host: "hv1", Generation: 2, Resources: 7, At: at})
	if strings.Contains(string(plain), "security") {
		t.Errorf("a report without counters names them: %s", plain)
	}
	sec, omitted := CompactSecurity([]status.PortSecurity{
		{Port: "web1 eth0", PortGroup: "pg-web", Link: "vn0123456789", Policy: "mac, ra, unicast, acl(2 rules, default deny)",
			Counters: map[string]uint64{"acl[0]": 4, "acl-default": 6, "forged-mac": 0}},
	}, 0)
	r := Report{Host: "hv1", Generation: 2, Resources: 7, At: at, Security: sec, SecurityOmitted: omitted}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"security":[{"port":"web1 eth0","portgroup":"pg-web"`, `"counters":{"acl-default":6,"acl[0]":4}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("lacks %s: %s", want, b)
		}
	}
	if strings.Contains(string(b), "forged-mac") || strings.Contains(string(b), "security_omitted") {
		t.Errorf("carries what counted nothing: %s", b)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, r) {
		t.Errorf("decodes to %+v (%v), want %+v", back, err, r)
	}
	// The bound holds the JSON of a full report to what MaxReportedPorts
	// promises.
	var many []status.PortSecurity
	for i := range MaxReportedPorts + 10 {
		many = append(many, status.PortSecurity{Port: fmt.Sprintf("vm%04d eth0", i), PortGroup: "pg-web", Link: "vn0123456789",
			Policy:   "mac, ip, ra, unicast, acl(2 rules, default deny)",
			Counters: map[string]uint64{"acl[0]": 123456, "acl[1]": 123456, "acl-default": 123456, "forged-mac": 12}})
	}
	r.Security, r.SecurityOmitted = CompactSecurity(many, 0)
	b, _ = json.Marshal(r)
	t.Logf("a full report: %d bytes", len(b))
	if len(r.Security) != MaxReportedPorts || r.SecurityOmitted != 10 || len(b) > 100<<10 {
		t.Errorf("a full report: %d ports, %d omitted, %d bytes", len(r.Security), r.SecurityOmitted, len(b))
	}
}
