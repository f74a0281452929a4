package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/reconcile"
)

func TestPrintSecurity(t *testing.T) {
	var b bytes.Buffer
	printSecurity(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no protected ports, yet: %q", b.String())
	}
	printSecurity(&b, []reconcile.SecurityStatus{
		{Port: "web eth0", PortGroup: "pg-web", Policy: "mac, unicast, acl(2 rules, default deny)", Counters: map[string]uint64{"acl[1]": 3, "acl-default": 7}},
		{Port: "app eth0", PortGroup: "pg-app", Policy: "mac, unicast"},
	})
	out := b.String()
	for _, want := range []string{"SECURITY PORT", "web eth0", "acl-default 7, acl[1] 3", "app eth0  "} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}
