package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/cespare/xxhash/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/vnet-project/vnet/internal/plan"
)

// A record's realized resources are kept apart from the rest of it, in
// chunks: bucket "realized", a bucket per infrastructure, one JSON list per
// chunk. A resource's chunk follows from a hash of it (see splitChunks),
// so a change to a few resources rewrites only their chunks (a changed
// resource may move to another), and a read of the record without them
// (Head) reads none. Which chunk holds a resource follows from the
// resource alone (a hash with no seed), and every write notes, beside the
// chunks, a hash of each chunk's resources and the token it wrote (see
// sumsBucket): a new process then rewrites only the chunks that changed,
// as the process that wrote last does. A record written before records
// were chunked holds its resources itself; Get reads either.
var realizedBucket = []byte("realized")

// sumsBucket holds, per infrastructure, the hash of each of its chunks'
// resources as a write left them, with that write's token: what a process
// that did not make the write knows of the chunks without reading them.
// It is trusted only while its token is the bucket's (any writer makes a
// new token, also one of a build of vnet that does not keep the sums), and
// kept apart from the chunks, which builds that do not know it read all of.
var sumsBucket = []byte("realized-sums")

// sumsVersion is the layout of the sums and the way resources are hashed
// into chunks (resourceHash): sums of another version are not trusted.
const sumsVersion = 1

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
	token string
	sums  *chunkSums // nil: no chunk
}

// chunkSums is a hash of each chunk's resources, for the chunks that hold
// any: arrays rather than a map, since a record of thousands of resources
// fills most of them.
type chunkSums struct {
	sum  [chunks]uint64
	used [chunks]bool
}

// has says chunk id holds resources, of which h is the hash.
func (c *chunkSums) has(id int) (h uint64, ok bool) {
	if c == nil || !c.used[id] {
		return 0, false
	}
	return c.sum[id], true
}

// chunkSplit is where a record's resources go: each one's chunk, and a
// hash of each chunk's resources, in order.
type chunkSplit struct {
	ids  []uint16
	sums *chunkSums
}

// hashInParallelFrom is the number of resources from which splitChunks
// hashes them on every CPU: the hashes of a record of thousands are most
// of the time its write takes.
const hashInParallelFrom = 2048

// splitChunks finds each resource's chunk and a hash of each chunk's
// resources, in order, from hs, each resource's hash.
func splitChunks(hs []uint64) chunkSplit {
	ids := make([]uint16, len(hs))
	sums := &chunkSums{}
	for i, h := range hs {
		id := uint16(h % chunks)
		ids[i] = id
		sums.sum[id] = sums.sum[id]*1099511628211 ^ h
		sums.used[id] = true
	}
	return chunkSplit{ids: ids, sums: sums}
}

// hashResources is resourceHash of each resource, in order.
func hashResources(rs []plan.Resource) []uint64 {
	hs := make([]uint64, len(rs))
	hashSome(rs, hs, nil)
	return hs
}

// hashSome sets hs[i] to resourceHash of rs[i] for each i of todo, or
// for every resource when todo is nil, on every CPU when there are many.
func hashSome(rs []plan.Resource, hs []uint64, todo []int) {
	n := len(rs)
	if todo != nil {
		n = len(todo)
	}
	hash := func(lo, hi int) {
		var buf []byte
		for k := lo; k < hi; k++ {
			i := k
			if todo != nil {
				i = todo[k]
			}
			buf, hs[i] = resourceHash(buf[:0], &rs[i])
		}
	}
	workers := min(runtime.GOMAXPROCS(0), n/(hashInParallelFrom/2))
	if workers < 2 {
		hash(0, n)
		return
	}
	var wg sync.WaitGroup
	per := (n + workers - 1) / workers
	for lo := per; lo < n; lo += per {
		wg.Go(func() { hash(lo, min(lo+per, n)) })
	}
	hash(0, per)
	wg.Wait()
}

// hashedResources are the resources of a write, as the record held them
// (not a copy: a record's Realized is not changed once written, and a copy
// of thousands cost more than their hashes), and the hash of each.
type hashedResources struct {
	rs []plan.Resource
	hs []uint64
}

// hashGrownInPlace is the hashes of rs, the last write's list grown past
// its end in the same array (a VM added in plan.Room's room): the last
// list's part of it is the same memory, which a written Realized never
// changes, and only what was appended is hashed.
func hashGrownInPlace(last *hashedResources, rs []plan.Resource) []uint64 {
	hs := make([]uint64, len(rs))
	copy(hs, last.hs)
	todo := make([]int, 0, len(rs)-len(last.rs))
	for i := len(last.rs); i < len(rs); i++ {
		todo = append(todo, i)
	}
	hashSome(rs, hs, todo)
	return hs
}

// hashReuseLookahead is how far past the last match the resources of the
// last write are searched for one of the next: a one-VM change drops a few
// resources in a row from the model, and adds a few.
const hashReuseLookahead = 8

// hashResourcesAfter is hashResources of rs, taking the hash of each
// resource equal to one of last (nil: none) from it. A change of one VM's
// part of a model of thousands of resources keeps the others in their
// order, so a walk of both lists in step finds them: comparing two
// resources costs a fraction of hashing one, whose strings are mostly
// the same memory. The hashes of a record of thousands were most of a
// write's CPU, and grew with the VMs at each container's ADD.
func hashResourcesAfter(last *hashedResources, rs []plan.Resource) []uint64 {
	if last == nil {
		return hashResources(rs)
	}
	if len(rs) > 0 && len(last.rs) > 0 && &rs[0] == &last.rs[0] {
		if len(rs) <= len(last.rs) {
			// The same list written again is hashed again, in case it
			// changed in place since.
			return hashResources(rs)
		}
		return hashGrownInPlace(last, rs)
	}
	hs := make([]uint64, len(rs))
	todo := []int{}
	j := 0
	for i := range rs {
		k := -1
		for d := 0; d < hashReuseLookahead && j+d < len(last.rs); d++ {
			if last.rs[j+d] == rs[i] {
				k = j + d
				break
			}
		}
		if k < 0 {
			todo = append(todo, i)
			continue
		}
		hs[i] = last.hs[k]
		j = k + 1
	}
	hashSome(rs, hs, todo)
	return hs
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
	return f.buf, xxhash.Sum64(f.buf)
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
		f.buf = append(f.buf, byte(f.n)) // its uvarint: fewer than 128 fields
		f.buf = binary.AppendUvarint(f.buf, uint64(len(s)))
		f.buf = append(f.buf, s...)
	}
}

func (f *fieldWriter) num(v uint64) {
	f.n++
	if v != 0 {
		f.buf = append(f.buf, byte(f.n))
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
	sumsB, err := u.bucket(tx, nil, nil, sumsBucket)
	if err != nil {
		return nil, err
	}
	ids, sums := split.ids, split.sums
	if cache == nil || string(b.Get(tokenKey)) != cache.token {
		cache = decodeSums(sumsB.Get([]byte(name)), b.Get(tokenKey))
	}
	if cache == nil {
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
	var changed [chunks]bool
	for id := range chunks {
		h, now := sums.has(id)
		old, before := cache.sums.has(id)
		if before && !now {
			if err := u.delete(b, path, chunkKey(uint16(id))); err != nil {
				return nil, err
			}
		}
		changed[id] = now && (!before || old != h)
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
	if err := u.put(sumsB, [][]byte{sumsBucket}, []byte(name), encodeSums(token, sums)); err != nil {
		return nil, err
	}
	return &chunkCache{token: token, sums: sums}, nil
}

// encodeSums is the value of an infrastructure's sums (sumsBucket): the
// version, the token, then each chunk's ID and hash.
func encodeSums(token string, sums *chunkSums) []byte {
	v := binary.AppendUvarint(make([]byte, 0, 2*binary.MaxVarintLen64+len(token)+10*chunks), sumsVersion)
	v = binary.AppendUvarint(v, uint64(len(token)))
	v = append(v, token...)
	for id := range chunks {
		if h, ok := sums.has(id); ok {
			v = binary.BigEndian.AppendUint16(v, uint16(id))
			v = binary.BigEndian.AppendUint64(v, h)
		}
	}
	return v
}

// decodeSums is what stored sums say the chunks hold when they are of
// this version and were written with the bucket's token; nil otherwise.
func decodeSums(v, token []byte) *chunkCache {
	version, n := binary.Uvarint(v)
	if n <= 0 || version != sumsVersion || len(token) == 0 {
		return nil
	}
	v = v[n:]
	size, n := binary.Uvarint(v)
	if n <= 0 || uint64(len(v)-n) < size {
		return nil
	}
	v = v[n:]
	if string(v[:size]) != string(token) {
		return nil
	}
	v = v[size:]
	if len(v)%10 != 0 {
		return nil
	}
	c := &chunkCache{token: string(token), sums: &chunkSums{}}
	for ; len(v) > 0; v = v[10:] {
		id := binary.BigEndian.Uint16(v)
		if id >= chunks {
			return nil
		}
		c.sums.sum[id], c.sums.used[id] = binary.BigEndian.Uint64(v[2:]), true
	}
	return c
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

// deleteRealized removes an infrastructure's chunks and their sums.
func deleteRealized(tx *bolt.Tx, name string, u *undoLog) error {
	if sums := tx.Bucket(sumsBucket); sums != nil {
		if err := u.delete(sums, [][]byte{sumsBucket}, []byte(name)); err != nil {
			return err
		}
	}
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
