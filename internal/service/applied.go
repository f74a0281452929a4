package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

// AppliedSpec is an infrastructure's spec as stored, with every value vnet
// chose for it (VNIs, vNICs' MACs) written into it: applied again,
// anywhere, it makes the same.
type AppliedSpec struct {
	Name       string       `json:"name" yaml:"name"`
	Generation int          `json:"generation" yaml:"generation"`
	AppliedAt  time.Time    `json:"applied_at" yaml:"applied_at"`
	SpecFile   string       `json:"spec_file" yaml:"spec_file"`
	Spec       history.Text `json:"spec" yaml:"spec"`
	// Allocations lists the VNIs and MACs in force, chosen or given.
	Allocations Allocations `json:"allocations" yaml:"allocations"`
}

// Allocations are the VNIs and vNIC MACs of an infrastructure: a VNI by
// "switch NAME" or "network NAME" (switches carried between hosts only),
// a MAC by "VM ethN" (a TAP's guest chooses its own, unless the spec
// gives one).
type Allocations struct {
	VNIs map[string]int    `json:"vnis" yaml:"vnis"`
	MACs map[string]string `json:"macs" yaml:"macs"`
}

// Applied is an infrastructure's applied spec with its allocations
// pinned.
func (l *Local) Applied(_ context.Context, name string) (*AppliedSpec, error) {
	return appliedOf(l, name)
}

// Applied is the spec stored in etcd with its allocations pinned.
func (c *Cluster) Applied(_ context.Context, name string) (*AppliedSpec, error) {
	return appliedOf(c, name)
}

func appliedOf(b historian, name string) (*AppliedSpec, error) {
	k, done, err := b.keeper()
	if err != nil {
		return nil, err
	}
	defer done()
	rec, err := k.head(name)
	if err != nil {
		return nil, err
	}
	doc, err := b.docOf(rec)
	if err != nil {
		return nil, err
	}
	doc, alloc, err := pinned(doc)
	if err != nil {
		return nil, err
	}
	return &AppliedSpec{Name: rec.Name, Generation: rec.Generation, AppliedAt: rec.AppliedAt, SpecFile: rec.SpecFile,
		Spec: history.Text(doc.Source), Allocations: alloc}, nil
}

// pinned is doc with its allocations written in where it leaves them out
// (spec.PinAllocations), and those allocations.
func pinned(doc *spec.Document) (*spec.Document, Allocations, error) {
	p := pinsOf(doc.Spec)
	out, err := spec.PinAllocations(doc, p)
	if err != nil {
		return nil, Allocations{}, fmt.Errorf("%s: pin its allocations: %w", doc.Spec.Name, err)
	}
	return out, allocationsOf(p), nil
}

// pinsOf is every allocation in force for a spec: its networks' VNIs
// (chosen as an apply chooses them, keeping those it gives), the VNIs of
// its switches carried between hosts, and its vNICs' MACs but those a
// TAP's guest chooses.
func pinsOf(s *spec.Spec) spec.Pins {
	p := spec.Pins{MACs: map[string][]string{}, SwitchVNIs: map[string]int{}, NetworkVNIs: spec.AllocateVNIs(s, s)}
	for i := range s.Switches {
		if sw := &s.Switches[i]; plan.Tunneled(s, sw) {
			p.SwitchVNIs[sw.Name] = int(plan.SwitchVNI(s.Name, sw))
		}
	}
	for i := range s.VMs {
		vm := &s.VMs[i]
		macs := make([]string, len(vm.NICs))
		for j, n := range vm.NICs {
			if n.TapName() == "" || n.MAC != "" {
				macs[j] = plan.VNICMAC(s.Name, vm, j)
			}
		}
		p.MACs[vm.Name] = macs
	}
	return p
}

func allocationsOf(p spec.Pins) Allocations {
	a := Allocations{VNIs: map[string]int{}, MACs: map[string]string{}}
	for name, v := range p.SwitchVNIs {
		a.VNIs["switch "+name] = v
	}
	for name, v := range p.NetworkVNIs {
		a.VNIs["network "+name] = v
	}
	for vm, macs := range p.MACs {
		for i, mac := range macs {
			if mac != "" {
				a.MACs[fmt.Sprintf("%s eth%d", vm, i)] = mac
			}
		}
	}
	return a
}

// SpecJSON is a spec's YAML as JSON, keys in the order written: JSON is
// YAML, so the result applies as the YAML does.
func SpecJSON(src []byte) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if len(root.Content) == 0 {
		buf.WriteString("null")
	} else if err := nodeJSON(&buf, root.Content[0]); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func nodeJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.AliasNode:
		return nodeJSON(buf, n.Alias)
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			buf.Write(k)
			buf.WriteByte(':')
			if err := nodeJSON(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := nodeJSON(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		return scalarJSON(buf, n)
	}
	return nil
}

func scalarJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		buf.WriteString("null")
		return nil
	case "!!bool", "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		if f, ok := v.(float64); ok {
			buf.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
			return nil
		}
		b, err := json.Marshal(v)
		buf.Write(b)
		return err
	}
	b, err := json.Marshal(n.Value)
	buf.Write(b)
	return err
}

// sortedKeys lists a map's keys in order, for printing.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
