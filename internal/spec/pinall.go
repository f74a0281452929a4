package spec

import (
	"strconv"

	"gopkg.in/yaml.v3"
)

// Pins are values vnet chose where a spec left the choice to it, to write
// into the spec so that it says them itself: a spec with every allocation
// pinned makes the same VNIs and MACs on another machine, in another
// cluster, or with a later vnet that chooses otherwise.
type Pins struct {
	// MACs are vNICs' MACs by VM, by vNIC index ("" leaves one alone).
	MACs map[string][]string
	// SwitchVNIs and NetworkVNIs are VNIs by switch and network name.
	SwitchVNIs  map[string]int
	NetworkVNIs map[string]int
}

// PinAllocations writes each value of p into the spec's source where the
// spec leaves that field out (one it gives is kept), keeping the rest of
// the YAML as written, and loads the result, which validates it. A spec
// that needs nothing written is returned as it is.
func PinAllocations(doc *Document, p Pins) (*Document, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc.Source, &root); err != nil {
		return nil, err
	}
	if len(root.Content) == 0 {
		return doc, nil
	}
	top := root.Content[0]
	wrote := false
	pinList := func(key string, each func(item *yaml.Node, name string)) {
		list := valueOf(top, key)
		if list == nil || list.Kind != yaml.SequenceNode {
			return
		}
		for _, item := range list.Content {
			if name := valueOf(item, "name"); name != nil {
				each(item, name.Value)
			}
		}
	}
	pin := func(m *yaml.Node, key, value, tag string) {
		if m.Kind == yaml.MappingNode && value != "" && valueOf(m, key) == nil {
			setKey(m, key, value, tag)
			wrote = true
		}
	}
	vni := func(vnis map[string]int) func(*yaml.Node, string) {
		return func(item *yaml.Node, name string) {
			if v := vnis[name]; v != 0 {
				pin(item, "vni", strconv.Itoa(v), "!!int")
			}
		}
	}
	pinList("switches", vni(p.SwitchVNIs))
	pinList("networks", vni(p.NetworkVNIs))
	pinList("vms", func(item *yaml.Node, name string) {
		nics := valueOf(item, "nics")
		if nics == nil || nics.Kind != yaml.SequenceNode {
			return
		}
		for i, n := range nics.Content {
			if i < len(p.MACs[name]) {
				pin(n, "mac", p.MACs[name][i], "!!str")
			}
		}
	})
	if !wrote {
		return doc, nil
	}
	return reload(doc.File, &root)
}
