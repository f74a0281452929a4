package plan

import (
	"slices"
	"testing"
)

func TestDroppedDevices(t *testing.T) {
	dev := func(ns, name string) Resource { return Resource{Kind: KindDevice, NS: ns, Name: name} }
	bridge := Resource{Kind: KindBridge, NS: "h", Name: "dvs0"}
	for _, c := range []struct {
		name       string
		next, last []Resource
		want       []string
	}{
		{name: "no last model", next: []Resource{dev("h", "tap1")}},
		{name: "nothing dropped", next: []Resource{bridge, dev("h", "tap1")}, last: []Resource{bridge, dev("h", "tap1")}},
		{name: "a VM's TAP goes", next: []Resource{bridge, dev("h", "tap1")}, last: []Resource{bridge, dev("h", "tap1"), dev("h", "tap2")},
			want: []string{"h/tap2"}},
		{name: "a TAP moves to another namespace", next: []Resource{dev("h2", "tap1")}, last: []Resource{dev("h", "tap1")},
			want: []string{"h/tap1"}},
		{name: "everything goes", last: []Resource{bridge, dev("h", "tap1"), dev("@host", "eth1")}, want: []string{"h/tap1", "@host/eth1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, r := range DroppedDevices(c.next, c.last) {
				got = append(got, r.NS+"/"+r.Name)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
