// Package speccache keeps specs that validated in a compact binary form
// (codec.go), so that loading the same bytes again costs a copy of the
// spec rather than decoding and validating its YAML: in memory and in
// files for the commands (Cache), and beside a spec stored in etcd or the
// local store for the agents (EncodeValidated, DecodeValidated). The form
// is bound to the SHA-256 of the YAML and to the layout of this build's
// spec.Spec, so that anything else is ignored and the YAML loaded as ever.
package speccache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/atomicfile"
	"github.com/vnet-project/vnet/internal/spec"
)

// Cache keeps the specs that loaded and validated, by the SHA-256 of their
// bytes, so that loading the same bytes again costs a copy of the spec
// instead of decoding and validating its YAML, which for a spec of
// thousands of virtual networks takes a few hundred milliseconds. It keeps
// them in memory, and with a directory also in files there, for the next
// process. Only specs that validated are kept: new or bad input is always
// decoded and validated, so its errors carry field paths and lines as
// ever. A nil *Cache keeps nothing.
//
// A document from the cache shares nothing with another: each gets a
// Spec of its own, which the caller may change. The positions of its
// fields (Document.PosOf) are read from its YAML when first asked for.
type Cache struct {
	dir string

	mu     sync.Mutex
	memory map[[sha256.Size]byte][]byte // source's SHA-256 -> encoded spec
	order  [][sha256.Size]byte          // oldest first
}

const (
	// cacheEntries is how many specs a Cache keeps in memory, and
	// cacheFiles how many it keeps in its directory: a process holds one
	// or two infrastructures, each as applied and as it was before.
	cacheEntries = 8
	cacheFiles   = 16
	// cacheSuffix names the cache's files in its directory, which may
	// hold other things.
	cacheSuffix = ".spec"
	cacheMagic  = "vnet spec cache 2\n"
)

// New makes a cache that keeps specs in memory, and in files in dir
// unless dir is "". The directory is made when a spec is first kept, if
// its parent exists.
func New(dir string) *Cache {
	return &Cache{dir: dir, memory: map[[sha256.Size]byte][]byte{}}
}

// Load is spec.Load, from the cache when the same bytes loaded before.
func (c *Cache) Load(file string, src []byte) (*spec.Document, error) {
	if doc, ok := c.lookup(file, src); ok {
		return doc, nil
	}
	doc, err := spec.Load(file, src)
	if err != nil {
		return nil, err
	}
	c.keep(doc)
	return doc, nil
}

// LoadFile is spec.LoadFile, from the cache when the file's bytes loaded
// before.
func (c *Cache) LoadFile(path string) (*spec.Document, error) {
	src, err := spec.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return c.Load(path, src)
}

// Decode is spec.Decode, from the cache when the same bytes loaded
// before. A spec decoded here for the first time is also validated, to be
// kept when it is valid; an invalid one is returned as spec.Decode would.
func (c *Cache) Decode(file string, src []byte) (*spec.Document, error) {
	if doc, ok := c.lookup(file, src); ok {
		return doc, nil
	}
	doc, err := spec.Decode(file, src)
	if err != nil {
		return nil, err
	}
	if c != nil && len(spec.Validate(doc)) == 0 {
		c.keep(doc)
	}
	return doc, nil
}

// Add keeps a document that validated, as Load, a Cache or spec.PinVNIs
// returned it, its Spec unchanged: a process that stores a spec it made
// (an apply, with its pinned VNIs) thus finds it when it reads the stored
// spec back. A document that did not validate (Decode's) is not kept.
func (c *Cache) Add(doc *spec.Document) {
	if c == nil || doc == nil || !doc.Validated() || len(doc.Source) > spec.MaxSpecBytes {
		return
	}
	c.keep(doc)
}

// AddEncoded is Add of a document whose EncodeValidated the caller made
// already: it keeps that encoding rather than encoding the spec again.
// An encoding that is not EncodeValidated's of doc is not kept; doc is
// added as Add adds it.
func (c *Cache) AddEncoded(doc *spec.Document, encoded []byte) {
	if c == nil || doc == nil || !doc.Validated() || len(doc.Source) > spec.MaxSpecBytes {
		return
	}
	sum := sha256.Sum256(doc.Source)
	body, ok := unframe(sum, encoded)
	if !ok {
		c.keep(doc)
		return
	}
	c.remember(sum, body)
	c.toFile(sum, encoded)
}

// lookup makes the document of src from the cache, when it is there.
func (c *Cache) lookup(file string, src []byte) (*spec.Document, bool) {
	if c == nil || len(src) > spec.MaxSpecBytes {
		return nil, false
	}
	sum := sha256.Sum256(src)
	encoded, ok := c.fromMemory(sum)
	if !ok {
		if encoded, ok = c.fromFile(sum); !ok {
			return nil, false
		}
		c.remember(sum, encoded)
	}
	doc, err := decodeCached(file, src, encoded)
	if err != nil {
		c.forget(sum)
		return nil, false
	}
	return doc, true
}

// keep stores a document that validated, as its source's.
func (c *Cache) keep(doc *spec.Document) {
	if c == nil {
		return
	}
	sum := sha256.Sum256(doc.Source)
	encoded := encodeCached(doc)
	c.remember(sum, encoded)
	c.toFile(sum, frame(sum, encoded))
}

func (c *Cache) fromMemory(sum [sha256.Size]byte) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	encoded, ok := c.memory[sum]
	if ok {
		c.order = append(slices.DeleteFunc(c.order, func(k [sha256.Size]byte) bool { return k == sum }), sum)
	}
	return encoded, ok
}

func (c *Cache) remember(sum [sha256.Size]byte, encoded []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.memory[sum]; !ok {
		c.order = append(c.order, sum)
	}
	c.memory[sum] = encoded
	for len(c.order) > cacheEntries {
		delete(c.memory, c.order[0])
		c.order = c.order[1:]
	}
}

func (c *Cache) forget(sum [sha256.Size]byte) {
	c.mu.Lock()
	delete(c.memory, sum)
	c.order = slices.DeleteFunc(c.order, func(k [sha256.Size]byte) bool { return k == sum })
	c.mu.Unlock()
	if c.dir != "" {
		_ = os.Remove(c.file(sum))
	}
}

func (c *Cache) file(sum [sha256.Size]byte) string {
	return filepath.Join(c.dir, hex.EncodeToString(sum[:])+cacheSuffix)
}

// header starts every cache file: what it is, the layout of the Spec that
// wrote it (another version of vnet reads nothing it would misread), and
// the SHA-256 of the source it was made of. A CRC-32C of the encoded spec
// follows it, so that a damaged file is not read as another spec.
func header(sum [sha256.Size]byte) []byte {
	layout := sha256.Sum256([]byte(specLayout()))
	h := append([]byte(cacheMagic), layout[:]...)
	return append(h, sum[:]...)
}

const checksumSize = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fromFile reads a spec the directory keeps; a file that is damaged or
// was written by another layout is a miss.
func (c *Cache) fromFile(sum [sha256.Size]byte) ([]byte, bool) {
	if c.dir == "" {
		return nil, false
	}
	name := c.file(sum)
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, false
	}
	encoded, ok := unframe(sum, data)
	if !ok {
		_ = os.Remove(name)
		return nil, false
	}
	now := time.Now()
	_ = os.Chtimes(name, now, now) // the files least used are dropped first
	return encoded, true
}

// toFile writes a spec, framed (see frame), to the directory, whole or
// not at all, and drops the files least recently used past cacheFiles. A
// directory that cannot be written only costs the next process the
// decoding. The file is not synced: its frame binds it to its source's
// SHA-256 and checks it with a CRC, so a file a power cut left empty or
// torn is a miss (fromFile), and a one-VM change of a large spec (a
// container's ADD) would otherwise sync the whole encoded spec each time.
func (c *Cache) toFile(sum [sha256.Size]byte, framed []byte) {
	if c.dir == "" {
		return
	}
	if err := os.Mkdir(c.dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return // no state directory to put it in, or not ours to write
	}
	if atomicfile.Replace(c.file(sum), framed, 0o600) != nil {
		return
	}
	c.prune()
}

func (c *Cache) prune() {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type kept struct {
		name string
		mod  time.Time
	}
	var files []kept
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), cacheSuffix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		files = append(files, kept{e.Name(), info.ModTime()})
	}
	if len(files) <= cacheFiles {
		return
	}
	slices.SortFunc(files, func(a, b kept) int { return a.mod.Compare(b.mod) })
	for _, f := range files[:len(files)-cacheFiles] {
		if err := os.Remove(filepath.Join(c.dir, f.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
}
