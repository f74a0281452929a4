package spec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec/spectest"
)

func TestExamplesAreValid(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples found")
	}
	for _, f := range files {
		if _, err := LoadFile(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// Each file in testdata/bad starts with "# want: TEXT"; loading it must fail
// with an error containing TEXT.
func TestBadSpecs(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(files) < 20 {
		t.Fatalf("want at least 20 bad specs, have %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want := spectest.WantedError(src)
			if want == "" {
				t.Fatal("no '# want:' line")
			}
			_, err = Load(f, src)
			if err == nil {
				t.Fatalf("accepted; want error containing %q", want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error:\n%v\nwant it to contain %q", err, want)
			}
			if !strings.Contains(err.Error(), "(line ") {
				t.Errorf("error has no line: %v", err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	doc, err := LoadFile("../../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := doc.Spec
	if got := s.HostPortName(0); got != "vmk0" {
		t.Errorf("host port name = %q", got)
	}
	sw, ok := s.PortGroupSwitch("pg-private")
	if !ok || sw.Name != "private0" || len(sw.SwitchHosts()) != 1 {
		t.Errorf("pg-private switch = %+v", sw)
	}
	dvs, _ := s.PortGroupSwitch("pg-vm")
	if got := strings.Join(dvs.SwitchHosts(), ","); got != "esx1,esx2" {
		t.Errorf("dvs0 hosts = %s", got)
	}
	if p := doc.PosOf("vms[0].nics[1].ip"); p.Line == 0 {
		t.Errorf("no position for vms[0].nics[1].ip")
	}
}

func TestAllErrorsReported(t *testing.T) {
	src := []byte("name: x\nvms:\n  - {name: a, host: nope}\n  - {name: b, host: nope2}\n")
	_, err := Load("x", src)
	var es Errors
	if !errors.As(err, &es) || len(es) != 2 {
		t.Fatalf("want 2 errors, got %v", err)
	}
	if es[0].Pos.Line != 3 || es[1].Pos.Line != 4 {
		t.Errorf("errors not in file order: %v", es)
	}
}

func TestValidateRealHostFields(t *testing.T) {
	base := `name: rh
hosts:
  - name: hv1
    nics: [{name: vmnic0, device: eth1}]
  - name: lab
    native: true
    nics: [{name: eth0, speed: 1Gbit, ip: 10.0.0.1/24}]
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: vmnic0}}]
    portgroups: [{name: pg}]
vms:
`
	for _, tc := range []struct {
		name, vms, want string
	}{
		{"tap", "  - {name: g1, host: hv1, nics: [{portgroup: pg, attach: {tap: tap0}, mac: \"52:54:00:00:00:01\"}]}\n", ""},
		{"netns", "  - {name: c1, host: hv1, nics: [{portgroup: pg, attach: {netns: box1}, ip: 10.1.0.1/24}]}\n", ""},
		{"both", "  - {name: g1, host: hv1, nics: [{portgroup: pg, attach: {tap: tap0, netns: box1}}]}\n", "attach either a tap or a netns"},
		{"neither", "  - {name: g1, host: hv1, nics: [{portgroup: pg, attach: {}}]}\n", "attach needs tap: NAME"},
		{"mixed", "  - {name: g1, host: hv1, nics: [{portgroup: pg, attach: {tap: tap0}}, {portgroup: pg}]}\n", "vms[0].nics[1].attach: VM g1 attaches its other vNICs"},
		{"two netns", "  - {name: c1, host: hv1, nics: [{portgroup: pg, attach: {netns: a}}, {portgroup: pg, attach: {netns: b}}]}\n", "one VM is one namespace"},
		{"vnet netns", "  - {name: c1, host: hv1, nics: [{portgroup: pg, attach: {netns: vnet.rh.x}}]}\n", "named like vnet's own"},
		{"slash", "  - {name: c1, host: hv1, nics: [{portgroup: pg, attach: {netns: ../x}}]}\n", "not a name in /run/netns"},
		{"tap offloads", "  - {name: g1, host: hv1, nics: [{portgroup: pg, attach: {tap: tap0}, offloads: {gro: true}}]}\n", "vms[0].nics[0].offloads: a TAP's offloads"},
		{"cpus", "  - {name: g1, host: hv1, cpus: 1, nics: [{portgroup: pg, attach: {tap: tap0}}]}\n", "vms[0].cpus: VM g1 brings its own vNICs"},
		{"same tap", "  - {name: g1, host: hv1, nics: [{portgroup: pg, attach: {tap: tap0}}]}\n  - {name: g2, host: hv1, nics: [{portgroup: pg, attach: {tap: tap0}}]}\n", "vms[1].nics[0].attach.tap: duplicate TAP device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("t.yaml", []byte(base+tc.vms))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	hostPort := base + "hostports:\n  - {host: hv1, portgroup: pg, ip: 10.2.0.1/24, name: eth1}\n"
	if _, err := Load("t.yaml", []byte(hostPort)); err == nil || !strings.Contains(err.Error(), `hostports[0].name: host port "eth1" on host "hv1" has the name of the machine's device at hosts[0].nics[0].device`) {
		t.Errorf("a host port named as a device of its host: got %v", err)
	}
	for _, tc := range []struct{ nics, want string }{
		{"[{name: vmnic0, device: eth1, ip: 10.0.0.5/24}]", "hosts[0].nics[0].ip: vnet leaves a real device's addresses alone"},
		{"[{name: vmnic0, device: eth1}, {name: vmnic1, device: eth1}]", "hosts[0].nics[1].device: duplicate device"},
		{"[{name: vmnic0, device: 'eth 1'}]", "not a valid interface name"},
		{"[{name: vmnic0}]", "hosts[0].nics[0].speed: a NIC needs a line rate"},
	} {
		src := strings.Replace(base, "[{name: vmnic0, device: eth1}]", tc.nics, 1)
		if _, err := Load("t.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("nics %s: got %v, want %q", tc.nics, err, tc.want)
		}
	}
}
