package topology

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldens are the pictures held in testdata: examples as they are, and one
// with a status.
var goldens = []golden{
	{"demo", "../../examples/demo.yaml", nil},
	{"teaming", "../../examples/teaming.yaml", nil},
	{"tenants-on-nics", "../../examples/networks/tenants-on-nics.yaml", nil},
	{"carrier", "testdata/carrier.yaml", nil},
	{"demo-status", "../../examples/demo.yaml", demoStatus},
}

// demoStatus is what vnet status might say of the demo with trouble: a
// vNIC down, one cut from its port group, a host port without its
// address and an uplink NIC down.
func demoStatus() *status.Infra {
	return &status.Infra{
		Name: "demo",
		Hosts: []status.Host{
			{Name: "esx1", NICs: []status.NIC{{Name: "vmnic0", State: "up"}, {Name: "vmnic1", State: "up"}}},
			{Name: "esx2", NICs: []status.NIC{{Name: "vmnic0", State: "down"}, {Name: "vmnic1", State: "up"}}},
		},
		Switches: []status.Switch{{Name: "dvs0", Type: "distributed"}},
		VMs: []status.VM{
			{Name: "web1", NICs: []status.Port{{Name: "eth0", State: "up"}, {Name: "eth1", State: "down"}}},
			{Name: "db1", NICs: []status.Port{{Name: "eth0", State: "disconnected"}}},
			{Name: "web2", NICs: []status.Port{{Name: "eth0", State: "up"}}},
		},
		HostPorts: []status.Port{{Host: "esx1", Name: "vmk0", State: "up"}, {Host: "esx2", Name: "vmk0", State: "no address"}},
	}
}

type golden struct {
	name, spec string
	status     func() *status.Infra
}

// build is the golden's graph, made anew.
func (gt golden) build(t *testing.T) *Graph {
	t.Helper()
	var st *status.Infra
	if gt.status != nil {
		st = gt.status()
	}
	return Build(loadSpec(t, gt.spec), st)
}

func loadSpec(t *testing.T, path string) *spec.Spec {
	t.Helper()
	doc, err := spec.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return doc.Spec
}

func render(t *testing.T, g *Graph, write func(*Graph, io.Writer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := write(g, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestGolden(t *testing.T) {
	for _, gt := range goldens {
		t.Run(gt.name, func(t *testing.T) {
			g := gt.build(t)
			for ext, write := range map[string]func(*Graph, io.Writer) error{"dot": (*Graph).WriteDOT, "svg": (*Graph).WriteSVG} {
				got := render(t, g, write)
				if again := render(t, gt.build(t), write); !bytes.Equal(got, again) {
					t.Errorf("%s: two renderings of one spec differ", ext)
				}
				path := filepath.Join("testdata", gt.name+"."+ext)
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (go test -run TestGolden -update writes it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from %s (go test -run TestGolden -update rewrites it after a change meant to alter the picture)", ext, path)
				}
			}
		})
	}
}

// The SVG is well-formed XML, and nothing in it overlaps what it must not:
// nodes of a row, host boxes, a host's nodes stay in its box, everything
// on the canvas.
func TestSVGGeometry(t *testing.T) {
	for _, gt := range goldens {
		t.Run(gt.name, func(t *testing.T) {
			g := gt.build(t)
			svg := render(t, g, (*Graph).WriteSVG)
			d := xml.NewDecoder(bytes.NewReader(svg))
			for {
				_, err := d.Token()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("not well-formed: %v", err)
				}
			}
			checkGeometry(t, layOut(g))
		})
	}
}

func checkGeometry(t *testing.T, l *layout) {
	t.Helper()
	const ε = 1e-6
	inside := func(in, out rect) bool {
		return in.x >= out.x-ε && in.y >= out.y-ε && in.x+in.w <= out.x+out.w+ε && in.y+in.h <= out.y+out.h+ε
	}
	overlap := func(a, b rect) bool {
		return a.x < b.x+b.w && b.x < a.x+a.w && a.y < b.y+b.h && b.y < a.y+a.h
	}
	canvas := rect{0, 0, l.width, l.height}
	for _, row := range l.rows {
		for i, p := range row {
			if !inside(p.rect, canvas) {
				t.Errorf("%s at %+v is off the canvas %+v", p.n.ID, p.rect, canvas)
			}
			for _, q := range row[i+1:] {
				if overlap(p.rect, q.rect) {
					t.Errorf("%s %+v and %s %+v overlap", p.n.ID, p.rect, q.n.ID, q.rect)
				}
			}
			for j, c := range p.ports {
				if !inside(c, p.rect) {
					t.Errorf("%s's cell %d %+v is outside it %+v", p.n.ID, j, c, p.rect)
				}
			}
		}
	}
	for i, b := range l.boxes {
		for _, p := range b.nodes {
			if !inside(p.rect, b.rect) {
				t.Errorf("%s %+v is outside its host's box %+v", p.n.ID, p.rect, b.rect)
			}
		}
		for _, c := range l.boxes[i+1:] {
			if overlap(b.rect, c.rect) {
				t.Errorf("the boxes of %s and %s overlap", b.host.Name, c.host.Name)
			}
		}
	}
}

// Graphviz reads the dot text without a complaint.
func TestDOTWithGraphviz(t *testing.T) {
	dot, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("SKIP: Graphviz's dot is not installed (Debian package graphviz): the dot text is checked against the golden files only")
	}
	for _, gt := range goldens {
		t.Run(gt.name, func(t *testing.T) {
			cmd := exec.Command(dot, "-Tsvg")
			cmd.Stdin = bytes.NewReader(render(t, gt.build(t), (*Graph).WriteDOT))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil || stderr.Len() > 0 {
				t.Fatalf("dot: %v\n%s", err, stderr.String())
			}
			if !bytes.Contains(out, []byte("<svg")) {
				t.Errorf("dot made no SVG:\n%s", out)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	s := loadSpec(t, "../../examples/demo.yaml")
	g := Build(s, nil)
	kinds := map[Kind]int{}
	for _, n := range g.Nodes {
		kinds[n.Kind]++
	}
	want := map[Kind]int{KindVM: 3, KindHostPort: 2, KindPortGroup: 3, KindSwitch: 3, KindNIC: 5, KindPhysical: 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d nodes of kind %s, want %d", kinds[k], k, n)
		}
	}
	edges := map[string]bool{}
	for _, e := range g.Edges {
		edges[e.From+":"+e.FromPort+" -> "+e.To+" "+e.Label] = true
	}
	for _, e := range []string{
		"vm/web1:eth1 -> portgroup/pg-private ",
		"hostport/esx2/vmk0: -> portgroup/pg-vmotion ",
		"portgroup/pg-vm: -> switch/dvs0 ",
		"switch/dvs1: -> nic/esx2/vmnic1 dvUplink2",
		"nic/client/eth0: -> physical ",
	} {
		if !edges[e] {
			t.Errorf("no edge %s", e)
		}
	}
	types := map[string]string{}
	for _, n := range g.Nodes {
		if n.Kind == KindSwitch {
			types[n.Name] = n.Detail[0]
		}
	}
	if types["dvs0"] != "distributed" || types["private0"] != "private" {
		t.Errorf("switch types %v", types)
	}
}

// What no valid spec holds still draws: an edge to nothing is left out,
// a VM on a host the spec lacks gets a box, and names are escaped.
func TestOddGraphs(t *testing.T) {
	s := &spec.Spec{Name: `a"b<c>&d`, VMs: []spec.VM{{Name: "v<1>", Host: "ghost", NICs: []spec.VNIC{{PortGroup: "nowhere"}}}, {Name: "bare", Host: "ghost"}}}
	g := Build(s, nil)
	if len(g.Edges) != 0 {
		t.Errorf("edges to nothing: %+v", g.Edges)
	}
	svg := render(t, g, (*Graph).WriteSVG)
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Errorf("SVG: %v\n%s", err, svg)
	}
	if !bytes.Contains(svg, []byte("host ghost")) || !bytes.Contains(svg, []byte("v&lt;1&gt;")) {
		t.Errorf("SVG lacks the ghost host or the escaped VM:\n%s", svg)
	}
	checkGeometry(t, layOut(g))
	dot := string(render(t, g, (*Graph).WriteDOT))
	if !strings.Contains(dot, `digraph "vnet a\"b<c>&d"`) || !strings.Contains(dot, "<B>v&lt;1&gt;</B>") {
		t.Errorf("dot:\n%s", dot)
	}
	if out := render(t, Build(&spec.Spec{Name: "empty"}, nil), (*Graph).WriteSVG); xml.Unmarshal(out, new(struct{})) != nil {
		t.Errorf("an empty spec's SVG:\n%s", out)
	}
	if xmlEscape("a\x00b\x1b") != "a\uFFFDb\uFFFD" {
		t.Errorf("control characters: %q", xmlEscape("a\x00b\x1b"))
	}
}
