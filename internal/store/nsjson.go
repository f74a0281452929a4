package store

import (
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/vnet-project/vnet/internal/plan"
)

// namespacesJSON writes a record's namespaces' IDs (plan.NamespaceIDs) as
// encoding/json does, keeping what it wrote last: the IDs of an
// infrastructure's namespaces are most often those of its last write, or
// differ in a namespace or two, and JSON wants their names sorted.
//
// Its zstd form is a frame per piece of the JSON, cut after the entries of
// the names that nsCutAfter picks: a cut follows from the names alone, so
// a namespace added or removed changes one piece, and a write compresses
// that piece alone, where a frame of the whole would be made anew. Frames
// one after another decompress as one (see encodeChunkedValue): readers
// of every build read either.
type namespacesJSON struct {
	mu         sync.Mutex
	boot, mark string
	ids        map[string]uint64 // a copy of what was written
	names      []string          // its keys, sorted
	json       []byte
	head       int    // where json's first entry starts, or would
	at         []int  // where each name's entry starts in json
	cut        []bool // whether each name's entry ends a piece (nsCutAfter)
	cuts       []int  // where json's pieces end, in order; the last is len(json)
	zstd       []byte // a frame of each piece, in order, once asked for
	// frames is the frame of each piece of json, by the piece, once asked
	// for: those of the last JSON compressed, for the pieces it shares
	// with the next.
	frames map[string][]byte
}

// frame is the JSON written last and its zstd form, a frame per piece;
// false when there is none, or it is too short for frames of its own to
// pay.
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
		c.zstd = c.compress()
	}
	return c.json, c.zstd, true
}

// compress is the zstd form of c.json: the frame of each piece, taken
// from the last JSON compressed where it had the same piece. It keeps the
// frames of c.json's pieces, and no others, for the next.
func (c *namespacesJSON) compress() []byte {
	frames := make(map[string][]byte, len(c.cuts))
	var out []byte
	from := 0
	for _, to := range c.cuts {
		piece := c.json[from:to]
		f, ok := c.frames[string(piece)]
		if !ok {
			f = recordEncoder().EncodeAll(piece, nil)
		}
		frames[string(piece)] = f
		out = append(out, f...)
		from = to
	}
	c.frames = frames
	return out
}

// frameNamespacesFrom is the size of the namespaces' JSON from which a
// record keeps it in zstd frames of its own (see encodeChunkedValue).
const frameNamespacesFrom = 4 << 10

// nsCutEvery is how many entries a piece of the namespaces' JSON holds on
// average (see namespacesJSON): at a thousand namespaces, 8 frames, each
// about as well compressed as a frame of the whole, of which an added
// namespace makes one anew.
const nsCutEvery = 128

// nsCutAfter says a piece of the namespaces' JSON ends after name's entry:
// for one name in nsCutEvery, whatever the names around it.
func nsCutAfter(name string) bool { return xxhash.Sum64String(name)%nsCutEvery == 0 }

// encode is ids' JSON, shared with later calls (not to be changed); false
// when a string needs escaping, which it leaves to encoding/json. IDs that
// differ from the last in a few names are written from the last JSON,
// whose other entries they copy: a thousand names cost a pass over the
// map, where sorting, checking and formatting them cost several.
func (c *namespacesJSON) encode(ids *plan.NamespaceIDs) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.json != nil && ids.Boot == c.boot && ids.Mark == c.mark && (ids.IDs == nil) == (c.ids == nil) {
		if ids.IDs == nil {
			return c.json, true
		}
		if d, ok := c.diff(ids.IDs); ok {
			return c.edit(ids.IDs, d)
		}
	}
	return c.whole(ids)
}

// nsDiff is what a record's namespaces' IDs change of those written last:
// the names added, those whose ID changed and those removed.
type nsDiff struct{ added, changed, removed []string }

// nsEditMax is the most names a change of the namespaces' IDs may touch
// for their JSON to be written from the last (see namespacesJSON.edit).
const nsEditMax = 64

// diff is what ids change of what was written last; false when they
// touch more than nsEditMax names.
func (c *namespacesJSON) diff(ids map[string]uint64) (nsDiff, bool) {
	var d nsDiff
	for name, id := range ids {
		old, ok := c.ids[name]
		switch {
		case !ok:
			d.added = append(d.added, name)
		case old != id:
			d.changed = append(d.changed, name)
		}
		if len(d.added)+len(d.changed) > nsEditMax {
			return d, false
		}
	}
	gone := len(c.ids) - (len(ids) - len(d.added))
	if gone > nsEditMax {
		return d, false
	}
	if gone > 0 {
		for name := range c.ids {
			if _, ok := ids[name]; !ok {
				d.removed = append(d.removed, name)
			}
		}
	}
	return d, true
}

// edit is the JSON of ids, which differ from the last written by d: the
// entries d leaves as they were are copied from the last JSON.
func (c *namespacesJSON) edit(ids map[string]uint64, d nsDiff) ([]byte, bool) {
	if len(d.added)+len(d.changed)+len(d.removed) == 0 {
		return c.json, true
	}
	for _, name := range d.added {
		if !plainJSON(name) {
			return nil, false
		}
	}
	for _, l := range [][]string{d.added, d.changed, d.removed} {
		slices.Sort(l)
	}
	n := len(c.names) + len(d.added) - len(d.removed)
	w := nsWriter{
		b:     make([]byte, 0, len(c.json)+len(d.added)*32),
		names: make([]string, 0, n),
		at:    make([]int, 0, n),
		cut:   make([]bool, 0, n),
	}
	w.b = append(w.b, c.json[:c.head]...)
	added, changed, removed := d.added, d.changed, d.removed
	for k, name := range c.names {
		for len(added) > 0 && added[0] < name {
			w.entry(added[0], ids[added[0]], nil, nsCutAfter(added[0]))
			added = added[1:]
		}
		switch {
		case len(removed) > 0 && removed[0] == name:
			removed = removed[1:]
		case len(changed) > 0 && changed[0] == name:
			changed = changed[1:]
			w.entry(name, ids[name], nil, c.cut[k])
		default:
			w.entry(name, 0, c.entryAt(k), c.cut[k])
		}
	}
	for _, name := range added {
		w.entry(name, ids[name], nil, nsCutAfter(name))
	}
	w.b = append(w.b, "}}"...)
	for _, name := range d.removed {
		delete(c.ids, name)
	}
	for _, l := range [][]string{d.added, d.changed} {
		for _, name := range l {
			c.ids[name] = ids[name]
		}
	}
	c.keep(&w)
	return c.json, true
}

// entryAt is the k-th entry of the last JSON, without its comma.
func (c *namespacesJSON) entryAt(k int) []byte {
	end := len(c.json) - len("}}")
	if k+1 < len(c.at) {
		end = c.at[k+1] - len(",")
	}
	return c.json[c.at[k]:end]
}

// whole is ids' JSON written anew.
func (c *namespacesJSON) whole(ids *plan.NamespaceIDs) ([]byte, bool) {
	if !plainJSON(ids.Boot) || !plainJSON(ids.Mark) {
		return nil, false
	}
	names := c.sortedNames(ids.IDs)
	w := nsWriter{b: make([]byte, 0, len(c.json)+64), names: names[:0:0],
		at: make([]int, 0, len(names)), cut: make([]bool, 0, len(names))}
	w.b = append(w.b, `{"boot":"`...)
	w.b = append(w.b, ids.Boot...)
	w.b = append(w.b, `","mark":"`...)
	w.b = append(w.b, ids.Mark...)
	w.b = append(w.b, `","ids":`...)
	if ids.IDs == nil {
		w.b = append(w.b, "null}"...)
	} else {
		w.b = append(w.b, '{')
		for _, name := range names {
			if !plainJSON(name) {
				return nil, false
			}
			w.entry(name, ids.IDs[name], nil, nsCutAfter(name))
		}
		w.b = append(w.b, "}}"...)
	}
	c.boot, c.mark, c.ids = ids.Boot, ids.Mark, maps.Clone(ids.IDs)
	c.keep(&w)
	return c.json, true
}

// nsWriter writes the namespaces' JSON, noting where each entry starts
// and which end a piece (see namespacesJSON).
type nsWriter struct {
	b     []byte
	names []string
	at    []int
	cut   []bool
}

// entry writes name's entry: entry when not nil, else made of its ID.
func (w *nsWriter) entry(name string, id uint64, entry []byte, cut bool) {
	if len(w.names) > 0 {
		w.b = append(w.b, ',')
	}
	w.names, w.at, w.cut = append(w.names, name), append(w.at, len(w.b)), append(w.cut, cut)
	if entry != nil {
		w.b = append(w.b, entry...)
		return
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, `":`...)
	w.b = strconv.AppendUint(w.b, id, 10)
}

// keep makes what w wrote the JSON written last.
func (c *namespacesJSON) keep(w *nsWriter) {
	cuts := make([]int, 0, len(w.names)/nsCutEvery+2)
	for k, cut := range w.cut {
		if cut && k+1 < len(w.at) {
			cuts = append(cuts, w.at[k+1]-len(","))
		}
	}
	c.head = len(w.b) - len("}}")
	if len(w.at) > 0 {
		c.head = w.at[0]
	}
	c.names, c.at, c.cut, c.json, c.cuts, c.zstd = w.names, w.at, w.cut, w.b, append(cuts, len(w.b)), nil
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
