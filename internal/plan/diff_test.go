package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// kernelNames replays a plan over the link names it makes and removes, the
// way the kernel would refuse a second link of one name in a namespace.
func kernelNames(t *testing.T, observed []Resource, p Plan) {
	t.Helper()
	held := map[string]bool{}
	for _, r := range observed {
		markAll(held, r.links())
	}
	for i, a := range p.Actions {
		if a.Op == OpDelete || a.Op == OpReplace {
			for _, l := range a.Old.links() {
				delete(held, l)
			}
		}
		if a.Op == OpCreate || a.Op == OpReplace {
			for _, l := range a.New.links() {
				if held[l] {
					t.Fatalf("step %d %s: file exists (%s)\n%s", i+1, a, l, p)
				}
				held[l] = true
			}
		}
	}
}

// renamed returns rs with the link name in namespace ns renamed, as
// `ip link set OLD name NEW` behind vnet's back would show it.
func renamed(rs []Resource, ns, old, name string) []Resource {
	out := make([]Resource, 0, len(rs))
	for _, r := range rs {
		switch {
		case r.Kind == KindVeth && r.A.NS == ns && r.A.Name == old:
			r.A.Name = name
		case r.Kind == KindVeth && r.B.NS == ns && r.B.Name == old:
			r.B.Name = name
		case r.NS == ns && r.Link == old:
			r.Link = name
		}
		out = append(out, r)
	}
	return out
}

func TestDiffRenamedLinkFreesItsNamesFirst(t *testing.T) {
	s := load(t, base+`
hostports:
  - {host: esx1, portgroup: pg-b, ip: 10.0.1.1/24}
`)
	model := Model(s, Options{})
	vm, host := NSName("t", "vm1"), NSName("t", "esx1")
	for _, tc := range []struct {
		name      string
		ns, link  string
		wantFirst string // the first action
	}{
		{"vNIC renamed in the VM", vm, "eth0", "- delete address 10.0.0.1/24 on foo in " + vm},
		{"host port renamed in the host", host, "vmk0", "- delete address 10.0.1.1/24 on foo in " + host},
		{"switch port renamed", host, VNICPortName("t", "vm1", 0), "-/+ replace veth " + vm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drifted := renamed(model, tc.ns, tc.link, "foo")
			for _, dir := range []struct {
				name              string
				desired, observed []Resource
			}{{"repair", model, drifted}, {"roll back", drifted, model}} {
				p := Diff(dir.desired, dir.observed)
				if p.Empty() {
					t.Fatalf("%s: no plan", dir.name)
				}
				kernelNames(t, dir.observed, p)
				if dir.name == "repair" && !strings.HasPrefix(p.Actions[0].String(), tc.wantFirst) {
					t.Errorf("%s starts with %s, want %s\n%s", dir.name, p.Actions[0], tc.wantFirst, p)
				}
			}
		})
	}
}

// What sat on the switch port that a renamed vNIC took with it is made
// again after the pair is.
func TestDiffRenamedLinkRemakesWhatSatOnItsPort(t *testing.T) {
	s := load(t, strings.Replace(base, "portgroups: [{name: pg-a}, {name: pg-b}]",
		"portgroups: [{name: pg-a, shaping: {egress: {average: 10Mbit, burst: 100KiB}}}, {name: pg-b}]", 1))
	model := Model(s, Options{})
	vm := NSName("t", "vm1")
	p := Diff(model, renamed(model, vm, "eth0", "foo"))
	kernelNames(t, renamed(model, vm, "eth0", "foo"), p)
	veth, shaper := -1, -1
	for i, a := range p.Actions {
		switch {
		case a.Op == OpCreate && a.New.Kind == KindVeth:
			veth = i
		case a.Op == OpCreate && a.New.Kind == KindShaper:
			shaper = i
		}
	}
	if veth < 0 || shaper < veth {
		t.Errorf("the port's shaper is not made again after the pair:\n%s", p)
	}
}

// A VM's namespace unmounted but not yet torn down by the kernel leaves its
// pair's switch port behind for a while, with the offloads and shaping set
// on it. The pair made again gets its own port, so what was read on the old
// one is set again on the new one, after the stranded end is gone; so too
// when the stranded end went between the reads of its links and of its
// offloads.
func TestDiffStrandedPortRemakesWhatWasReadOnIt(t *testing.T) {
	s := load(t, strings.Replace(base, "portgroups: [{name: pg-a}, {name: pg-b}]",
		"portgroups: [{name: pg-a, shaping: {ingress: {average: 10Mbit, burst: 100KiB}}}, {name: pg-b}]", 1))
	s.VMs[0].NICs[0].Offloads = &spec.Offloads{GRO: new(bool)}
	model := Model(s, Options{})
	vm, host := NSName("t", "vm1"), NSName("t", "esx1")
	for _, endSeen := range []bool{true, false} {
		var observed []Resource
		for _, r := range model {
			switch {
			case r.Kind == KindNetns && r.Name == vm, r.NS == vm:
			case r.Kind == KindVeth && r.A.NS == vm:
				if endSeen {
					observed = append(observed, Resource{Kind: KindVeth, A: r.B, Owner: "stranded"})
				}
			default:
				observed = append(observed, r)
			}
		}
		p := Diff(model, observed)
		kernelNames(t, observed, p)
		index := map[string]int{}
		for i, a := range p.Actions {
			index[string(a.Op)+" "+string(a.Subject().Kind)+" "+a.Subject().NS] = i
		}
		veth := index["create veth "]
		if del, ok := index["delete veth "]; endSeen && (!ok || del > veth) {
			t.Fatalf("the stranded port is not deleted before the pair is made:\n%s", p)
		}
		for _, kind := range []Kind{KindOffloads, KindShaper} {
			if i, ok := index["create "+string(kind)+" "+host]; !ok || i < veth {
				t.Errorf("stranded end seen %v: the port's %s is not set again after the pair is made:\n%s", endSeen, kind, p)
			}
		}
	}
}

func TestDiffMarkIsAChangeInPlace(t *testing.T) {
	model := Model(load(t, base), Options{})
	marked := MarkOwned(model, "t", "0123abcd", "/var/lib/vnet")
	p := Diff(marked, model)
	for _, a := range p.Actions {
		if a.Op != OpModify || !Markable(a.New.Kind) || !strings.Contains(a.String(), "mark none -> vnet:t:0123abcd:/var/lib/vnet") {
			t.Errorf("unexpected %s", a)
		}
	}
	if len(p.Actions) != 5 { // the physical switch, two hosts, one VM and its cgroup
		t.Errorf("want every namespace and cgroup marked, got:\n%s", p)
	}
}

// TestMarkOwnedLeavesItsInput: marking returns every namespace
// marked, copies the model only when one is not, and never changes the
// model it was given.
func TestMarkOwnedLeavesItsInput(t *testing.T) {
	model := Model(load(t, base), Options{})
	before := slices.Clone(model)
	marked := MarkOwned(model, "t", "0123abcd", "/var/lib/vnet")
	if !slices.Equal(model, before) {
		t.Fatal("marking changed the model it was given")
	}
	want := Mark{Infra: "t", Store: "0123abcd", Dir: "/var/lib/vnet"}.String()
	for i, r := range marked {
		if Markable(r.Kind) && r.Mark != want {
			t.Errorf("%s marked %q, want %q", r.Key(), r.Mark, want)
		}
		if !Markable(r.Kind) && r != model[i] {
			t.Errorf("%s changed by marking", r.Key())
		}
	}
	again := MarkOwned(marked, "t", "0123abcd", "/var/lib/vnet")
	if len(again) != len(marked) || &again[0] != &marked[0] {
		t.Error("a model marked already is copied")
	}
	other := MarkOwned(marked, "t", "4567cdef", "/var/lib/vnet")
	if &other[0] == &marked[0] || other[0].Mark == marked[0].Mark && other[0].Kind == KindNetns {
		t.Error("another store's marks are not made anew in a copy")
	}
}

// A model made with a mark (Options.Mark) is the model made without one,
// marked (MarkOwned), for the lab and for each host, and one marked
// already is not copied to be marked again.
func TestModelMadeMarkedIsTheModelMarked(t *testing.T) {
	s := load(t, base)
	mark := Mark{Infra: "t", Store: "0123abcd", Dir: "/var/lib/vnet"}
	opts := []Options{{NumCPU: 2}, {NumCPU: 2, PortPrograms: true}}
	for _, h := range s.Hosts {
		opts = append(opts, Options{NumCPU: 2, Host: h.Name, HostNS: "root-" + h.Name})
	}
	for _, opt := range opts {
		want := MarkOwned(Model(s, opt), "t", mark.Store, mark.Dir)
		opt.Mark = mark.String()
		got := Model(s, opt)
		if !slices.Equal(got, want) {
			t.Errorf("host %q: the model made marked differs from the model marked:\n%s", opt.Host, Diff(got, want))
		}
		if again := MarkOwned(got, "t", mark.Store, mark.Dir); len(got) > 0 && &again[0] != &got[0] {
			t.Errorf("host %q: a model made marked is copied to be marked", opt.Host)
		}
	}
}

func TestMarkRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		alias string
		want  Mark
		ok    bool
	}{
		{"vnet:demo:0123abcd:/var/lib/vnet", Mark{"demo", "0123abcd", "/var/lib/vnet"}, true},
		{"vnet:demo:0123abcd", Mark{"demo", "0123abcd", ""}, true},
		{"vnet:demo:0123abcd:/odd:dir", Mark{"demo", "0123abcd", "/odd:dir"}, true},
		{"vnet:vm web1 eth0", Mark{}, false}, // a link's owner label
		{"vnet:peer=vnet.demo.esx1/vmnic0", Mark{}, false},
		{"vnet::x", Mark{}, false},
		{"", Mark{}, false},
	} {
		got, ok := ParseMark(tc.alias)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseMark(%q) = %+v, %v; want %+v, %v", tc.alias, got, ok, tc.want, tc.ok)
		}
		if ok && got.String() != tc.alias {
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), tc.alias)
		}
	}
	long := Mark{Infra: "demo", Store: "0123abcd", Dir: "/" + strings.Repeat("d", 300)}
	if s := long.String(); s != "vnet:demo:0123abcd" {
		t.Errorf("a directory too long for an alias: %q", s)
	}
}
