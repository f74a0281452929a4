package libvirthook

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/service"
)

// domain is a domain's XML with the given metadata and interfaces.
func domain(meta, ifaces string) string {
	return `<domain type='qemu'><name>guest1</name><uuid>0c1d2e3f-0000-4000-8000-000000000001</uuid>
<metadata>` + meta + `</metadata><devices>` + ifaces + `</devices></domain>`
}

const (
	vnetMeta = `<vnet:vnet xmlns:vnet='https://github.com/vnet-project/vnet/libvirt' infra='lab'>
  <vnet:interface dev='tap-guest1' portgroup='pg-web'/></vnet:vnet>`
	ethIface = `<interface type='ethernet'><mac address='52:54:00:44:00:0A'/><target dev='tap-guest1'/></interface>`
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, xml string
		want      *Guest
		err       string
	}{
		{name: "the example's", xml: domain(vnetMeta, ethIface), want: &Guest{Domain: "guest1", UUID: "0c1d2e3f-0000-4000-8000-000000000001",
			Infra: "lab", Wait: DefaultWait, NICs: []NIC{{Tap: "tap-guest1", MAC: "52:54:00:44:00:0a", PortGroup: "pg-web"}}}},
		{name: "no metadata of vnet's", xml: domain(`<other xmlns='urn:x' infra='lab'/>`, ethIface)},
		{name: "an element named vnet of another namespace", xml: domain(`<x:vnet xmlns:x='urn:x' infra='lab'/>`, ethIface)},
		{name: "a network, a host, a state directory and a wait",
			xml: domain(`<vnet xmlns='https://github.com/vnet-project/vnet/libvirt' infra='lab' host='hv1' stateDir='/srv/vnet' wait='30s'>
  <interface dev='tap-guest1' network='a-web'/></vnet>`, ethIface),
			want: &Guest{Domain: "guest1", UUID: "0c1d2e3f-0000-4000-8000-000000000001", Infra: "lab", Host: "hv1", Site: service.AttachSite{StateDir: "/srv/vnet"},
				Wait: 30 * time.Second, NICs: []NIC{{Tap: "tap-guest1", MAC: "52:54:00:44:00:0a", Network: "a-web"}}}},
		{name: "a cluster's etcd over TLS",
			xml: domain(strings.Replace(vnetMeta, "infra='lab'", "infra='lab' host='hv2' etcd='https://10.0.0.1:2379, https://10.0.0.2:2379' etcdCA='/etc/vnet/ca.pem' etcdCert='/etc/vnet/c.pem' etcdKey='/etc/vnet/k.pem'", 1), ethIface),
			want: &Guest{Domain: "guest1", UUID: "0c1d2e3f-0000-4000-8000-000000000001", Infra: "lab", Host: "hv2", Wait: DefaultWait,
				Site: service.AttachSite{Etcd: []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379"},
					TLS: service.TLSFiles{CA: "/etc/vnet/ca.pem", Cert: "/etc/vnet/c.pem", Key: "/etc/vnet/k.pem"}},
				NICs: []NIC{{Tap: "tap-guest1", MAC: "52:54:00:44:00:0a", PortGroup: "pg-web"}}}},
		{name: "TLS files without etcd", xml: domain(strings.Replace(vnetMeta, "infra='lab'", "infra='lab' etcdCA='/ca.pem'", 1), ethIface),
			err: "go with etcd="},
		{name: "a certificate without its key", xml: domain(strings.Replace(vnetMeta, "infra='lab'", "infra='lab' etcd='http://127.0.0.1:2379' etcdCert='/c.pem'", 1), ethIface),
			err: "etcdCert= and etcdKey= go together"},
		{name: "no infra", xml: domain(strings.Replace(vnetMeta, "infra='lab'", "", 1), ethIface), err: "infra= names no infrastructure"},
		{name: "no interface", xml: domain(`<vnet:vnet xmlns:vnet='https://github.com/vnet-project/vnet/libvirt' infra='lab'/>`, ethIface),
			err: "says which TAP goes where"},
		{name: "port group and network", xml: domain(strings.Replace(vnetMeta, "portgroup='pg-web'", "portgroup='pg-web' network='n'", 1), ethIface),
			err: "interface 1: give dev= and one of portgroup= and network="},
		{name: "a TAP the domain lacks", xml: domain(vnetMeta, strings.Replace(ethIface, "tap-guest1", "tap-other", 1)),
			err: "no <interface type='ethernet'> with <target dev='tap-guest1'/>"},
		{name: "a bridge interface", xml: domain(vnetMeta, strings.Replace(ethIface, "ethernet", "bridge", 1)),
			err: `interface tap-guest1 is of type "bridge"`},
		{name: "no MAC", xml: domain(vnetMeta, `<interface type='ethernet'><target dev='tap-guest1'/></interface>`), err: "has no <mac"},
		{name: "a bad wait", xml: domain(strings.Replace(vnetMeta, "infra='lab'", "infra='lab' wait='soon'", 1), ethIface),
			err: `wait="soon" is not a duration`},
		{name: "not XML", xml: "<domain", err: "the domain's XML"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := Parse([]byte(c.xml))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (g == nil) != (c.want == nil) || g != nil && !equal(g, c.want) {
				t.Fatalf("got %+v, want %+v", g, c.want)
			}
		})
	}
}

func equal(a, b *Guest) bool {
	if len(a.NICs) != len(b.NICs) {
		return false
	}
	for i := range a.NICs {
		if a.NICs[i] != b.NICs[i] {
			return false
		}
	}
	x, y := *a, *b
	x.NICs, y.NICs = nil, nil
	return x.Domain == y.Domain && x.UUID == y.UUID && x.Infra == y.Infra && x.Host == y.Host && reflect.DeepEqual(x.Site, y.Site) && x.Wait == y.Wait
}

// fakeBackend records the calls and fails the attachments of the TAPs
// named in fail.
type fakeBackend struct {
	service.Attacher
	calls []string
	fail  string
}

func (f *fakeBackend) Attach(_ context.Context, r service.AttachRequest) (*service.AttachResult, error) {
	f.calls = append(f.calls, "attach "+r.Tap+" "+r.Guest+" "+r.MAC+" "+r.PortGroup)
	if r.Tap == f.fail {
		return nil, errors.New("refused")
	}
	return &service.AttachResult{}, nil
}

func (f *fakeBackend) Detach(_ context.Context, r service.DetachRequest) (*service.DetachResult, error) {
	f.calls = append(f.calls, "detach "+r.Ifname+" "+r.Container)
	return &service.DetachResult{}, nil
}

func (f *fakeBackend) Close() error { return nil }

func TestRun(t *testing.T) {
	two := strings.Replace(vnetMeta, "</vnet:vnet>", "<vnet:interface dev='tap-guest2' portgroup='pg-web'/></vnet:vnet>", 1) + ""
	ifaces := ethIface + strings.NewReplacer("tap-guest1", "tap-guest2", "0A", "0B").Replace(ethIface)
	const id = "0c1d2e3f-0000-4000-8000-000000000001"
	for _, c := range []struct {
		name, op, xml, fail string
		calls               []string
		err                 string
	}{
		{name: "started attaches", op: "started", xml: domain(two, ifaces),
			calls: []string{"attach tap-guest1 guest1 52:54:00:44:00:0a pg-web", "attach tap-guest2 guest1 52:54:00:44:00:0b pg-web"}},
		{name: "stopped detaches", op: "stopped", xml: domain(two, ifaces), calls: []string{"detach tap-guest1 " + id, "detach tap-guest2 " + id}},
		{name: "release detaches", op: "release", xml: domain(vnetMeta, ethIface), calls: []string{"detach tap-guest1 " + id}},
		{name: "release detaches a TAP the interfaces no longer name", op: "release",
			xml: domain(vnetMeta, `<interface type='ethernet'><mac address='52:54:00:44:00:0a'/></interface>`), calls: []string{"detach tap-guest1 " + id}},
		{name: "prepare does nothing", op: "prepare", xml: domain(vnetMeta, ethIface)},
		{name: "nor does migrate, with anything on its input", op: "migrate", xml: "<not xml"},
		{name: "a domain without vnet's metadata", op: "started", xml: domain("", ethIface)},
		{name: "a failed attachment takes back the ones before it", op: "started", xml: domain(two, ifaces), fail: "tap-guest2",
			calls: []string{"attach tap-guest1 guest1 52:54:00:44:00:0a pg-web", "attach tap-guest2 guest1 52:54:00:44:00:0b pg-web", "detach tap-guest1 " + id},
			err:   "domain guest1: put TAP tap-guest2 on pg-web of lab: refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeBackend{fail: c.fail}
			err := Run(context.Background(), []string{"guest1", c.op, "begin", "-"}, strings.NewReader(c.xml),
				func(service.AttachSite) (backend, error) { return f, nil })
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
			if strings.Join(f.calls, "\n") != strings.Join(c.calls, "\n") {
				t.Errorf("calls:\n%s\nwant\n%s", strings.Join(f.calls, "\n"), strings.Join(c.calls, "\n"))
			}
		})
	}
	if err := Run(context.Background(), []string{"guest1"}, strings.NewReader(""), nil); err == nil {
		t.Error("no operation: no error")
	}
}

func TestInvoked(t *testing.T) {
	for args, want := range map[string]bool{
		"/etc/libvirt/hooks/qemu.d/vnet": true,
		"/usr/local/bin/vnet":            false,
		"":                               false,
	} {
		if got := Invoked(strings.Fields(args)); got != want {
			t.Errorf("Invoked(%q) = %v", args, got)
		}
	}
}

// The documented example, as libvirt passes it (with the UUID it gives a
// domain defined without one), puts its TAP on pg-web.
func TestExampleDomain(t *testing.T) {
	data, err := os.ReadFile("../../examples/libvirt/guest1.xml")
	if err != nil {
		t.Fatal(err)
	}
	live := strings.Replace(string(data), "</name>", "</name><uuid>0c1d2e3f-0000-4000-8000-000000000001</uuid>", 1)
	g, err := Parse([]byte(live))
	want := []NIC{{Tap: "tap-guest1", MAC: "52:54:00:44:00:09", PortGroup: "pg-web"}}
	if err != nil || g == nil || g.Infra != "lab" || len(g.NICs) != 1 || g.NICs[0] != want[0] {
		t.Fatalf("%+v, %v; want infra lab with %+v", g, err, want)
	}
}
