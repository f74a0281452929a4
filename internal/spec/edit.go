package spec

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// SetVNIC rewrites a spec's source so that one vNIC is on portgroup and
// connected or not, keeping the rest of the YAML (comments, order, flow
// style) as written. nic is "eth1" or "1". The result is validated.
func SetVNIC(doc *Document, vm, nic, portgroup string, connected bool) (*Document, error) {
	idx, err := vnicIndex(nic)
	if err != nil {
		return nil, err
	}
	v, ok := doc.Spec.VM(vm)
	if !ok {
		return nil, fmt.Errorf("no VM %q in %s", vm, doc.Spec.Name)
	}
	if idx >= len(v.NICs) {
		return nil, fmt.Errorf("VM %s has %d vNICs (eth0..eth%d), not eth%d", vm, len(v.NICs), len(v.NICs)-1, idx)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(doc.Source, &root); err != nil {
		return nil, err
	}
	m := vnicNode(&root, vm, idx)
	if m == nil {
		return nil, fmt.Errorf("vms: %s eth%d not found in the stored YAML", vm, idx)
	}
	if portgroup != "" {
		setKey(m, "portgroup", portgroup, "!!str")
	}
	if connected {
		deleteKey(m, "connected")
	} else {
		setKey(m, "connected", "false", "!!bool")
	}
	return reload(doc.File, &root)
}

// reload writes an edited YAML tree back out and loads it as the spec of
// file, so that the edit is validated like any file.
func reload(file string, root *yaml.Node) (*Document, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return Load(file, buf.Bytes())
}

func vnicIndex(nic string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(nic, "eth"))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("vNIC %q: want eth0, eth1, ... or an index", nic)
	}
	return n, nil
}

// vnicNode finds vms[name=vm].nics[idx] in a document node.
func vnicNode(root *yaml.Node, vm string, idx int) *yaml.Node {
	if len(root.Content) == 0 {
		return nil
	}
	vms := valueOf(root.Content[0], "vms")
	if vms == nil || vms.Kind != yaml.SequenceNode {
		return nil
	}
	for _, item := range vms.Content {
		if name := valueOf(item, "name"); name == nil || name.Value != vm {
			continue
		}
		nics := valueOf(item, "nics")
		if nics == nil || nics.Kind != yaml.SequenceNode || idx >= len(nics.Content) {
			return nil
		}
		return nics.Content[idx]
	}
	return nil
}

func valueOf(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func setKey(m *yaml.Node, key, value, tag string) {
	if v := valueOf(m, key); v != nil {
		v.Value, v.Tag, v.Kind = value, tag, yaml.ScalarNode
		return
	}
	m.Content = append(m.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value})
}

func deleteKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}
