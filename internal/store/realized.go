package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/vnet-project/vnet/internal/plan"
)

// A record's realized resources are kept apart from the rest of it, in
// chunks: bucket "realized", a bucket per infrastructure, one JSON list per
// chunk. A resource's chunk follows from a hash of it (see splitChunks),
// so a change to a few resources rewrites only their chunks (a changed
// resource may move to another), and a read of the record without them
// (Head) reads none. Which chunk holds a resource is of this process
// alone: a process that did not write the chunks last rewrites them all. A record written before records
// were chunked holds its resources itself; Get reads either.
var realizedBucket = []byte("realized")

// chunks is how many chunks a record's resources are spread over: a change
// to one virtual network of 10,000 (tens of thousands of resources on a
// host) rewrites a few dozen resources per chunk it touches.
const chunks = 1024

// tokenKey holds, in an infrastructure's bucket of chunks, a random value
// made anew by every write: a Bolt that wrote the token last knows what
// every chunk holds without reading it (see chunkCache).
var tokenKey = []byte("token")

func chunkKey(id uint16) []byte { return binary.BigEndian.AppendUint16([]byte("c"), id) }

// chunkCache is what this process last wrote of an infrastructure's
// chunks: the token it wrote and a hash of each chunk's resources, in
// order. Another writer's token makes it void.
type chunkCache struct {
	token  string
	hashes map[uint16]uint64
}

var chunkSeed = maphash.MakeSeed()

// chunkSplit is where a record's resources go: each one's chunk, and a
// hash of each chunk's resources, in order.
type chunkSplit struct {
	ids    []uint16
	hashes map[uint16]uint64
}

// splitChunks finds each resource's chunk and a hash of each chunk's
// resources, in order.
func splitChunks(rs []plan.Resource) chunkSplit {
	ids := make([]uint16, len(rs))
	var sums [chunks]uint64
	var used [chunks]bool
	var buf []byte
	for i := range rs {
		var h uint64
		buf, h = resourceHash(buf[:0], &rs[i])
		id := uint16(h % chunks)
		ids[i] = id
		sums[id] = sums[id]*1099511628211 ^ h
		used[id] = true
	}
	hashes := map[uint16]uint64{}
	for id := range sums {
		if used[id] {
			hashes[uint16(id)] = sums[id]
		}
	}
	return chunkSplit{ids: ids, hashes: hashes}
}

// resourceHash hashes every field of r that is set, each after its
// number and (a string) its length, in buf: a record of tens of thousands
// of resources is hashed at every write, most of whose fields are unset.
func resourceHash(buf []byte, r *plan.Resource) ([]byte, uint64) {
	f := fieldWriter{buf: buf}
	f.str(string(r.Kind))
	f.str(r.NS)
	f.str(r.Name)
	f.str(r.MAC)
	f.num(uint64(r.MTU))
	f.end(&r.A)
	f.end(&r.B)
	f.str(r.Link)
	f.str(r.CIDR)
	f.num(r.Rate)
	f.num(uint64(r.GRO))
	f.num(uint64(r.TSO))
	f.num(r.LeafRate)
	f.num(r.Ceil)
	f.num(uint64(r.Quantum))
	f.num(r.Burst)
	f.num(uint64(r.Class))
	f.num(uint64(r.Prio))
	f.str(r.Match)
	f.num(uint64(r.CPUMilli))
	f.str(r.CPUs)
	f.str(r.Why)
	f.str(r.Sysctls)
	f.str(r.Mark)
	f.num(uint64(r.VNI))
	f.str(r.Local)
	f.str(r.Remote)
	f.num(uint64(r.Port))
	f.flag(r.Isolate)
	f.str(r.Owner)
	return f.buf, maphash.Bytes(chunkSeed, f.buf)
}

// fieldWriter appends the fields of a resource that are set, each after
// its number in the order written.
type fieldWriter struct {
	buf []byte
	n   uint64
}

func (f *fieldWriter) str(s string) {
	f.n++
	if s != "" {
		f.buf = binary.AppendUvarint(f.buf, f.n)
		f.buf = binary.AppendUvarint(f.buf, uint64(len(s)))
		f.buf = append(f.buf, s...)
	}
}

func (f *fieldWriter) num(v uint64) {
	f.n++
	if v != 0 {
		f.buf = binary.AppendUvarint(f.buf, f.n)
		f.buf = binary.AppendUvarint(f.buf, v)
	}
}

func (f *fieldWriter) flag(b bool) {
	if b {
		f.num(1)
	} else {
		f.num(0)
	}
}

func (f *fieldWriter) end(e *plan.End) {
	f.str(e.NS)
	f.str(e.Name)
	f.str(e.MAC)
	f.num(uint64(e.MTU))
	f.str(e.Master)
	f.flag(e.Isolated)
	f.flag(e.Down)
}

// group is the resources of the chunks wanted, each in the order given.
func group(rs []plan.Resource, ids []uint16, wanted *[chunks]bool) map[uint16][]plan.Resource {
	out := map[uint16][]plan.Resource{}
	for i, id := range ids {
		if wanted[id] {
			out[id] = append(out[id], rs[i])
		}
	}
	return out
}

// putRealized writes an infrastructure's resources in its bucket of
// chunks (split: splitChunks of rs): only the chunks that differ from what
// cache (nil: unknown) says the bucket holds. It returns what the bucket
// then holds.
func putRealized(tx *bolt.Tx, name string, rs []plan.Resource, split chunkSplit, cache *chunkCache, u *undoLog) (*chunkCache, error) {
	top, err := u.bucket(tx, nil, nil, realizedBucket)
	if err != nil {
		return nil, err
	}
	b, err := u.bucket(tx, top, [][]byte{realizedBucket}, []byte(name))
	if err != nil {
		return nil, err
	}
	path := [][]byte{realizedBucket, []byte(name)}
	ids, hashes := split.ids, split.hashes
	if cache == nil || string(b.Get(tokenKey)) != cache.token {
		// What the bucket holds is unknown: every chunk it has goes.
		var stale [][]byte
		if err := b.ForEach(func(k, _ []byte) error { stale = append(stale, slices.Clone(k)); return nil }); err != nil {
			return nil, err
		}
		for _, k := range stale {
			if err := u.delete(b, path, k); err != nil {
				return nil, err
			}
		}
		cache = &chunkCache{}
	}
	for id := range cache.hashes {
		if _, ok := hashes[id]; !ok {
			if err := u.delete(b, path, chunkKey(id)); err != nil {
				return nil, err
			}
		}
	}
	var changed [chunks]bool
	for id, h := range hashes {
		if old, ok := cache.hashes[id]; !ok || old != h {
			changed[id] = true
		}
	}
	for id, g := range group(rs, ids, &changed) {
		v, err := json.Marshal(g)
		if err != nil {
			return nil, err
		}
		if err := u.put(b, path, chunkKey(id), v); err != nil {
			return nil, err
		}
	}
	token := rand.Text()
	if err := u.put(b, path, tokenKey, []byte(token)); err != nil {
		return nil, err
	}
	return &chunkCache{token: token, hashes: hashes}, nil
}

// getRealized reads an infrastructure's resources from its chunks, nil
// when it has none.
func getRealized(tx *bolt.Tx, name string) ([]plan.Resource, error) {
	top := tx.Bucket(realizedBucket)
	if top == nil {
		return nil, nil
	}
	b := top.Bucket([]byte(name))
	if b == nil {
		return nil, nil
	}
	out := []plan.Resource{}
	err := b.ForEach(func(k, v []byte) error {
		if string(k) == string(tokenKey) {
			return nil
		}
		var g []plan.Resource
		if err := json.Unmarshal(v, &g); err != nil {
			return &damage{fmt.Errorf("record %q: realized resources: %w", name, err)}
		}
		out = append(out, g...)
		return nil
	})
	return out, err
}

// deleteRealized removes an infrastructure's chunks.
func deleteRealized(tx *bolt.Tx, name string, u *undoLog) error {
	top := tx.Bucket(realizedBucket)
	if top == nil {
		return nil
	}
	return u.deleteBucket(top, [][]byte{realizedBucket}, []byte(name))
}

// checkRealized checks that every chunk is JSON (see checkTx).
func checkRealized(tx *bolt.Tx) error {
	top := tx.Bucket(realizedBucket)
	if top == nil {
		return nil
	}
	return top.ForEachBucket(func(name []byte) error {
		return top.Bucket(name).ForEach(func(k, v []byte) error {
			if string(k) != string(tokenKey) && !json.Valid(v) {
				return &damage{fmt.Errorf("record %q: realized resources: not JSON", name)}
			}
			return nil
		})
	})
}
