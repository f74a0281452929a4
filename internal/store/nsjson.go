package store

import (
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/vnet-project/vnet/internal/plan"
)

// namespacesJSON writes a record's namespaces' IDs (plan.NamespaceIDs) as
// encoding/json does, keeping what it wrote last: the IDs of an
// infrastructure's namespaces are most often those of its last write, or
// differ in a namespace or two, and JSON wants their names sorted.
type namespacesJSON struct {
	mu         sync.Mutex
	boot, mark string
	ids        map[string]uint64 // a copy of what was written
	names      []string          // its keys, sorted
	json       []byte
	zstd       []byte // a zstd frame of json, once asked for
}

// frame is the JSON written last and a zstd frame of it; false when
// there is none, or it is too short for a frame of its own to pay.
func (c *namespacesJSON) frame() (json, frame []byte, ok bool) {
	if c == nil {
		return nil, nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.json) < frameNamespacesFrom {
		return nil, nil, false
	}
	if c.zstd == nil {
		c.zstd = recordEncoder().EncodeAll(c.json, nil)
	}
	return c.json, c.zstd, true
}

// frameNamespacesFrom is the size of the namespaces' JSON from which a
// record keeps it in a zstd frame of its own (see encodeChunkedValue).
const frameNamespacesFrom = 4 << 10

// encode is ids' JSON, shared with later calls (not to be changed); false
// when a string needs escaping, which it leaves to encoding/json.
func (c *namespacesJSON) encode(ids *plan.NamespaceIDs) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.json != nil && ids.Boot == c.boot && ids.Mark == c.mark && (ids.IDs == nil) == (c.ids == nil) && maps.Equal(ids.IDs, c.ids) {
		return c.json, true
	}
	if !plainJSON(ids.Boot) || !plainJSON(ids.Mark) {
		return nil, false
	}
	names := c.sortedNames(ids.IDs)
	b := make([]byte, 0, len(c.json)+64)
	b = append(b, `{"boot":"`...)
	b = append(b, ids.Boot...)
	b = append(b, `","mark":"`...)
	b = append(b, ids.Mark...)
	b = append(b, `","ids":`...)
	if ids.IDs == nil {
		b = append(b, "null}"...)
	} else {
		b = append(b, '{')
		for i, name := range names {
			if !plainJSON(name) {
				return nil, false
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, name...)
			b = append(b, `":`...)
			b = strconv.AppendUint(b, ids.IDs[name], 10)
		}
		b = append(b, "}}"...)
	}
	c.boot, c.mark, c.ids, c.names, c.json, c.zstd = ids.Boot, ids.Mark, maps.Clone(ids.IDs), names, b, nil
	return b, true
}

// sortedNames is the keys of ids, sorted: the names written last, less
// those ids lacks, with the few new ones put in their place.
func (c *namespacesJSON) sortedNames(ids map[string]uint64) []string {
	names := make([]string, 0, len(ids))
	for _, name := range c.names {
		if _, ok := ids[name]; ok {
			names = append(names, name)
		}
	}
	kept := len(names)
	for name := range ids {
		if _, ok := c.ids[name]; !ok {
			names = append(names, name)
		}
	}
	if len(names) == kept {
		return names
	}
	if len(names)-kept > 64 {
		slices.Sort(names)
		return names
	}
	// Few are new: each goes into its place among those before it.
	for i := kept; i < len(names); i++ {
		name := names[i]
		at, _ := slices.BinarySearch(names[:i], name)
		copy(names[at+1:i+1], names[at:i])
		names[at] = name
	}
	return names
}

// namespacesOf is the namespaces' JSON kept for infra (see namespacesJSON).
func (b *Bolt) namespacesOf(infra string) *namespacesJSON {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	c, ok := b.nsJSON[infra]
	if !ok {
		if b.nsJSON == nil {
			b.nsJSON = map[string]*namespacesJSON{}
		}
		c = &namespacesJSON{}
		b.nsJSON[infra] = c
	}
	return c
}

// plainJSON says s is written in JSON as it is, between quotes: printable
// ASCII but for what encoding/json escapes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
