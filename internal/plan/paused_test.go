package plan

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

const pausedSpec = `
name: t
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 1Gbit}]
switches:
  - name: vs0
    uplinks: [{name: u1, nics: {esx1: vmnic0}}]
    portgroups: [{name: pg-a}, {name: pg-b}, {name: pg-vmk}]
networks:
  - {name: blue, subnet: 10.9.0.0/24}
vms:
  - name: vm1
    host: esx1
    nics: [{portgroup: pg-a, ip: 10.0.0.1/24}, {portgroup: pg-b, ip: 10.1.0.1/24}]
  - name: vm2
    host: esx1
    nics: [{portgroup: pg-a, ip: 10.0.0.2/24}, {portgroup: pg-b, ip: 10.1.0.2/24, connected: false}]
  - name: vm3
    host: esx1
    nics: [{network: blue, ip: 10.9.0.3/24}]
hostports:
  - {host: esx1, portgroup: pg-vmk, ip: 10.2.0.1/24}
`

func TestPausedSelects(t *testing.T) {
	s := load(t, pausedSpec)
	vm1, _ := s.VM("vm1")
	vm3, _ := s.VM("vm3")
	tests := []struct {
		name   string
		p      Paused
		vm1    [2]bool // vm1's eth0 (pg-a), eth1 (pg-b)
		vm3    bool    // on network blue
		hostPG bool    // the host port on pg-vmk
	}{
		{"nothing", nil, [2]bool{}, false, false},
		{"everything", Paused{PauseAll}, [2]bool{true, true}, true, true},
		{"a VM", Paused{PauseVM("vm1")}, [2]bool{true, true}, false, false},
		{"another VM", Paused{PauseVM("vm2")}, [2]bool{}, false, false},
		{"a port group", Paused{PausePortGroup("pg-b")}, [2]bool{false, true}, false, false},
		{"a host port's port group", Paused{PausePortGroup("pg-vmk")}, [2]bool{}, false, true},
		{"a network", Paused{PauseNetwork("blue")}, [2]bool{}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 2 {
				if got := tc.p.VNIC("vm1", &vm1.NICs[i]); got != tc.vm1[i] {
					t.Errorf("vm1 eth%d paused %v, want %v", i, got, tc.vm1[i])
				}
			}
			if got := tc.p.VNIC("vm3", &vm3.NICs[0]); got != tc.vm3 {
				t.Errorf("vm3 eth0 paused %v, want %v", got, tc.vm3)
			}
			if got := tc.p.HostPort("pg-vmk"); got != tc.hostPG {
				t.Errorf("host port paused %v, want %v", got, tc.hostPG)
			}
		})
	}
}

func TestPausedSet(t *testing.T) {
	var p Paused
	p = p.With(PauseVM("b")).With(PauseVM("a")).With(PauseVM("b"))
	if want := (Paused{"vm/a", "vm/b"}); !slices.Equal(p, want) {
		t.Fatalf("With: %v, want %v", p, want)
	}
	q := p.Without("vm/a")
	if !slices.Equal(q, Paused{"vm/b"}) || !slices.Equal(p, Paused{"vm/a", "vm/b"}) {
		t.Errorf("Without: %v (and p %v, which must not change)", q, p)
	}
	if q.Without("vm/b") != nil {
		t.Error("nothing paused is not nil")
	}
	if !(Paused{"vm/b", "", "vm/a", "vm/b"}).Equal(p) || (Paused{}).Normal() != nil {
		t.Error("Normal does not sort, compact and drop empty selectors")
	}
}

func TestPausedCheckAndPrune(t *testing.T) {
	s := load(t, pausedSpec)
	good := Paused{PauseAll, PauseVM("vm1"), PauseNetwork("blue"), PausePortGroup("pg-vmk")}
	if err := good.Check(s); err != nil {
		t.Errorf("Check(%v): %v", good, err)
	}
	for _, bad := range []string{"vm/nope", "network/pg-a", "portgroup/vm1", "vm/", "switch/vs0", "vm1"} {
		err := (Paused{bad}).Check(s)
		if !errors.Is(err, ErrPauseSelector) || !errors.Is(err, spec.ErrInvalid) {
			t.Errorf("Check(%q) = %v, want ErrPauseSelector (and spec.ErrInvalid)", bad, err)
		}
	}
	mixed := Paused{PauseVM("gone"), PauseVM("vm1")}
	if got := mixed.Prune(s); !slices.Equal(got, Paused{"vm/vm1"}) {
		t.Errorf("Prune: %v", got)
	}
}

// A pause changes only the paused ports' switch-side ends, in place: their
// bridge stays their master and everything else of the VM stays as it is.
func TestModelPausedPortsAreDownInPlace(t *testing.T) {
	s := load(t, pausedSpec)
	running := Model(s, Options{NumCPU: 2})
	for _, p := range []Paused{{PauseVM("vm1")}, {PausePortGroup("pg-a")}, {PauseNetwork("blue")}, {PauseAll}, {PausePortGroup("pg-vmk")}} {
		paused := Model(s, Options{NumCPU: 2, Paused: p})
		d := Diff(paused, running)
		if len(d.Actions) == 0 {
			t.Errorf("%v: no change", p)
		}
		for _, a := range d.Actions {
			if a.Op != OpModify || a.Subject().Kind != KindVeth || !strings.Contains(a.String(), "b down false -> true") {
				t.Errorf("%v: %s, want only changes of veths' switch-side ends to down", p, a)
			}
			if a.New.B.Master == "" {
				t.Errorf("%v: %s: the paused port left its bridge", p, a)
			}
		}
		if back := Diff(running, paused); len(back.Actions) != len(d.Actions) {
			t.Errorf("%v: resuming takes %d actions, pausing %d", p, len(back.Actions), len(d.Actions))
		}
	}
	// A disconnected vNIC stays out of its switch, paused or not.
	for _, r := range Model(s, Options{NumCPU: 2, Paused: Paused{PauseAll}}) {
		if r.Kind == KindVeth && r.A.Name == "eth1" && r.A.NS == NSName("t", "vm2") && r.B.Master != "" {
			t.Errorf("disconnected vm2 eth1, paused, is a port of %s", r.B.Master)
		}
	}
}
