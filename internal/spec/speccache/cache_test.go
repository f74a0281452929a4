package speccache

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/spectest"
)

// richSpec sets most fields, pointers to false and to zero among them, and
// both forms of an ACL peer, so that a copy that lost one shows.
const richSpec = `name: rich
hosts:
  - name: esx1
    underlay: 192.168.1.1
    nics:
      - {name: vmnic0, speed: 1Gbit, mtu: 9000}
      - {name: vmnic1, speed: 1Gbit}
  - name: esx2
    underlay: 192.168.1.2
    nics: [{name: vmnic0, speed: 10Gbit}]
switches:
  - name: dvs0
    mtu: 1500
    vni: 4343
    ioc: {enabled: true, pools: {vm: {shares: high, limit: 800Mbit, reservation: 100Mbit}, mgmt: {shares: "20"}}}
    teaming: {policy: loadbased, active: [up1], standby: [up2], lbt: {threshold: 80%, window: 10s}, notify: false, failback: false}
    uplinks:
      - {name: up1, nics: {esx1: vmnic0, esx2: vmnic0}}
      - {name: up2, nics: {esx1: vmnic1}}
    hosts: []
    portgroups:
      - name: pg
        pool: vm
        shaping:
          egress: {average: 100Mbit, peak: 200Mbit, burst: 100KiB}
        classify:
          - {proto: tcp, dport: 5001, dscp: 0, pool: mgmt}
        security: {promiscuous: false, macChanges: true, forgedTransmits: false}
        acl:
          default: deny
          rules:
            - {action: allow, direction: ingress, proto: tcp, dport: 443, from: 0.0.0.0/0}
            - {action: allow, direction: ingress, from: {portgroup: pg}}
            - {action: allow, direction: egress, to: 10.0.0.0/8}
      - name: pg2
  - name: priv
    hosts: [esx1]
    portgroups: [{name: pg-priv}]
networks:
  - {name: n1, subnet: 10.9.0.0/24, subnet6: "fd00:9::/64"}
  - {name: n2, vni: 4242, subnet: 10.8.0.0/24, gateway: 10.8.0.1, router: r1, mtu: 1400}
vms:
  - name: vm1
    host: esx1
    cpus: 0.5
    nics:
      - {portgroup: pg, ip: 10.0.0.1/24, mtu: 1500, mac: "02:00:00:00:00:01", connected: false, offloads: {gro: false, tso: true}}
      - {portgroup: pg-priv}
  - name: vm2
    host: esx2
    nics:
      - {network: n1, ip: 10.9.0.5/24, ip6: "fd00:9::5/64"}
      - {network: n2, ip: 10.8.0.5/24}
  - {name: vm3, host: esx1, nics: [{network: n1, ip: 10.9.0.6/24}]}
hostports:
  - {host: esx1, portgroup: pg, ip: 10.0.0.2/24, name: vmk0}
  - {host: esx2, portgroup: pg2, ip: 10.1.0.2/24}
`

// validSources are specs that load: the examples, richSpec and generated
// large ones.
func validSources(t *testing.T) map[string][]byte {
	t.Helper()
	srcs := map[string][]byte{
		"rich.yaml":     []byte(richSpec),
		"vms.yaml":      spectest.VMs(300),
		"networks.yaml": spectest.Networks(500),
	}
	err := filepath.WalkDir("../../../examples", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		src, err := os.ReadFile(path)
		srcs[path] = src
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return srcs
}

// TestCacheEquivalence loads each valid spec through a cache, from
// nothing, from memory and from the cache's files in another process: each
// time the document must equal what Load makes.
func TestCacheEquivalence(t *testing.T) {
	for name, src := range validSources(t) {
		t.Run(filepath.Base(name), func(t *testing.T) {
			want, err := spec.Load(name, src)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			c := New(dir)
			for _, step := range []struct {
				what  string
				cache *Cache
			}{
				{"first load", c},
				{"from memory", c},
				{"from a file", New(dir)},
			} {
				got, err := step.cache.Load(name, src)
				if err != nil {
					t.Fatalf("%s: %v", step.what, err)
				}
				sameDocument(t, step.what, got, want)
			}
		})
	}
}

// wantPositions are the positions of a document.
func wantPositions(d *spec.Document) map[string]spec.Pos {
	positions, _ := d.Positions()
	return positions
}

// sameDocument checks that got is want: the same spec, file and source,
// and the same position and Given for every path want has.
func sameDocument(t *testing.T, what string, got, want *spec.Document) {
	t.Helper()
	if !reflect.DeepEqual(got.Spec, want.Spec) {
		t.Fatalf("%s: spec differs:\n got %+v\nwant %+v", what, got.Spec, want.Spec)
	}
	if got.File != want.File || string(got.Source) != string(want.Source) {
		t.Errorf("%s: file %q (%d bytes), want %q (%d bytes)", what, got.File, len(got.Source), want.File, len(want.Source))
	}
	for path, pos := range wantPositions(want) {
		if g := got.PosOf(path); g != pos {
			t.Errorf("%s: PosOf(%q) = %v, want %v", what, path, g, pos)
		}
		if g, w := got.Given(path), want.Given(path); g != w {
			t.Errorf("%s: Given(%q) = %v, want %v", what, path, g, w)
		}
	}
	if g, w := got.PosOf("vms[99999].name"), want.PosOf("vms[99999].name"); g != w {
		t.Errorf("%s: PosOf of a path not written = %v, want %v", what, g, w)
	}
}

// TestCacheCopiesAreIndependent changes a document the cache made: the
// next one from the same bytes must not see it.
func TestCacheCopiesAreIndependent(t *testing.T) {
	c := New("")
	src := []byte(richSpec)
	want, err := spec.Load("rich.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		doc, err := c.Load("rich.yaml", src)
		if err != nil {
			t.Fatal(err)
		}
		sameDocument(t, "load", doc, want)
		doc.Spec.Name = "changed"
		doc.Spec.VMs[0].NICs[0].Connected = nil
		*doc.Spec.Switches[0].Teaming.Notify = true
		doc.Spec.Switches[0].IOC.Pools["vm"] = spec.PoolSpec{}
		doc.Spec.Switches[0].Uplinks[0].NICs["esx9"] = "x"
		doc.Spec.Networks = append(doc.Spec.Networks[:0], spec.Network{Name: "other"})
	}
}

// TestCacheKeepsNoBadSpec loads every bad spec through a cache: the error
// is Load's, with its path and line, and nothing is kept.
func TestCacheKeepsNoBadSpec(t *testing.T) {
	files, _ := filepath.Glob("../testdata/bad/*.yaml")
	if len(files) == 0 {
		t.Fatal("no bad specs")
	}
	dir := t.TempDir()
	c := New(dir)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, want := spec.Load(f, src)
		for i := 0; i < 2; i++ {
			_, got := c.Load(f, src)
			if got == nil || got.Error() != want.Error() {
				t.Errorf("%s: cache's error %v, want %v", f, got, want)
			}
		}
		wantDoc, wantErr := spec.Decode(f, src)
		gotDoc, gotErr := c.Decode(f, src)
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Errorf("%s: cache's Decode error %v, want %v", f, gotErr, wantErr)
		}
		if wantDoc != nil && (gotDoc == nil || !reflect.DeepEqual(gotDoc.Spec, wantDoc.Spec)) {
			t.Errorf("%s: cache's Decode differs from Decode", f)
		}
	}
	if len(c.memory) != 0 {
		t.Errorf("the cache keeps %d bad specs in memory", len(c.memory))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the cache keeps %d files of bad specs", len(entries))
	}
}

// TestCacheDamagedFile spoils the cache's file in several ways: loading
// must still give the spec, decoded again, and never panic.
func TestCacheDamagedFile(t *testing.T) {
	src := []byte(richSpec)
	want, err := spec.Load("rich.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		spoil func([]byte) []byte
	}{
		{"empty", func([]byte) []byte { return nil }},
		{"cut short", func(b []byte) []byte { return b[:len(b)-7] }},
		{"header only", func(b []byte) []byte { return b[:len(cacheMagic)+64] }},
		{"another layout", func(b []byte) []byte { b[len(cacheMagic)] ^= 1; return b }},
		{"a byte more", func(b []byte) []byte { return append(b, 0) }},
		{"huge length", func(b []byte) []byte {
			return append(b[:len(cacheMagic)+64], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)
		}},
		{"a byte of the spec flipped", func(b []byte) []byte { b[len(b)/2] ^= 0x20; return b }},
		{"every byte flipped", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := New(dir).Load("rich.yaml", src); err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*"+cacheSuffix))
			if len(files) != 1 {
				t.Fatalf("%d cache files, want 1", len(files))
			}
			good, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			variants := [][]byte{}
			if tc.spoil != nil {
				variants = append(variants, tc.spoil(append([]byte(nil), good...)))
			} else {
				for i := 0; i < len(good); i += 11 { // header, checksum and spec alike
					b := append([]byte(nil), good...)
					b[i] ^= 0xff
					variants = append(variants, b)
				}
			}
			for _, b := range variants {
				if err := os.WriteFile(files[0], b, 0o600); err != nil {
					t.Fatal(err)
				}
				got, err := New(dir).Load("rich.yaml", src)
				if err != nil {
					t.Fatal(err)
				}
				sameDocument(t, "after "+tc.name, got, want)
			}
		})
	}
}

// TestCacheDropsOldFiles keeps more specs than the directory holds.
func TestCacheDropsOldFiles(t *testing.T) {
	dir := t.TempDir()
	c := New(dir)
	for i := 0; i < cacheFiles+5; i++ {
		if _, err := c.Load("v.yaml", spectest.VMs(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"+cacheSuffix))
	if len(files) != cacheFiles {
		t.Errorf("%d files kept, want %d", len(files), cacheFiles)
	}
	if len(c.memory) != cacheEntries || len(c.order) != cacheEntries {
		t.Errorf("%d specs in memory (%d in order), want %d", len(c.memory), len(c.order), cacheEntries)
	}
}

func TestNilCacheLoads(t *testing.T) {
	var c *Cache
	doc, err := c.Load("rich.yaml", []byte(richSpec))
	if err != nil {
		t.Fatal(err)
	}
	if doc.Spec.Name != "rich" {
		t.Errorf("name %q", doc.Spec.Name)
	}
	if _, err := c.Decode("rich.yaml", []byte(richSpec)); err != nil {
		t.Fatal(err)
	}
}

// TestCacheAdd keeps documents made elsewhere: a loaded one and a pinned
// one are found by their bytes, a decoded one that did not validate is
// not kept.
func TestCacheAdd(t *testing.T) {
	c := New(t.TempDir())
	loaded, pinned, bad := documentsToAdd(t)
	for _, doc := range []*spec.Document{loaded, pinned, bad} {
		c.Add(doc)
	}
	if len(c.memory) != 2 {
		t.Fatalf("%d specs kept, want 2", len(c.memory))
	}
	for _, doc := range []*spec.Document{loaded, pinned} {
		got, ok := New(c.dir).lookup(doc.File, doc.Source)
		if !ok {
			t.Fatalf("%s not kept", doc.File)
		}
		want, err := spec.Load(doc.File, doc.Source)
		if err != nil {
			t.Fatal(err)
		}
		sameDocument(t, "added", got, want)
	}
}

// documentsToAdd are a loaded document, the same pinned, and one decoded
// that did not validate.
func documentsToAdd(t *testing.T) (loaded, pinned, bad *spec.Document) {
	t.Helper()
	loaded, err := spec.Load("rich.yaml", []byte(richSpec))
	if err != nil {
		t.Fatal(err)
	}
	if pinned, err = spec.PinVNIs(loaded, nil); err != nil {
		t.Fatal(err)
	}
	if bad, err = spec.Decode("bad.yaml", []byte(strings.Replace(richSpec, "host: esx2", "host: nowhere", 1))); err != nil {
		t.Fatal(err)
	}
	return loaded, pinned, bad
}

// TestCacheAddEncoded: a document added with the encoding stored beside
// it is kept as Add keeps it, in memory and in the directory; with an
// encoding of other bytes, or none, it is kept all the same, and one
// that did not validate is not.
func TestCacheAddEncoded(t *testing.T) {
	loaded, pinned, bad := documentsToAdd(t)
	for _, tc := range []struct {
		name     string
		encoding []byte
	}{
		{"its own encoding", EncodeValidated(pinned)},
		{"another spec's encoding", EncodeValidated(loaded)},
		{"no encoding", nil},
	} {
		c := New(t.TempDir())
		c.AddEncoded(pinned, tc.encoding)
		c.AddEncoded(bad, tc.encoding)
		if len(c.memory) != 1 {
			t.Fatalf("%s: %d specs kept, want 1", tc.name, len(c.memory))
		}
		want, err := spec.Load(pinned.File, pinned.Source)
		if err != nil {
			t.Fatal(err)
		}
		for where, cache := range map[string]*Cache{"memory": c, "directory": New(c.dir)} {
			got, ok := cache.lookup(pinned.File, pinned.Source)
			if !ok {
				t.Fatalf("%s: not kept in %s", tc.name, where)
			}
			sameDocument(t, tc.name+", "+where, got, want)
		}
	}
}

// TestPinFromCache pins documents made without decoding their YAML (from
// a Cache, in memory and in its files, and from a stored encoding), and
// documents pinned before: each must give the source, spec and positions
// that pinning the freshly loaded document gives.
func TestPinFromCache(t *testing.T) {
	block := "name: dc\nhosts:\n  - name: h1\nnetworks:\n  - name: a\n    subnet: 10.1.0.0/24\n  - {name: b, subnet: 10.2.0.0/24}\n  - name: c\n    vni: 7\n    subnet: 10.3.0.0/24\n"
	for _, src := range []string{block, string(spectest.Networks(50))} {
		fresh, err := spec.Load("t.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		want, err := spec.PinVNIs(fresh, nil)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := spec.Load("t.yaml", want.Source) // with all its positions
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		c := New(dir)
		if _, err := c.Load("t.yaml", []byte(src)); err != nil {
			t.Fatal(err)
		}
		fromMemory, _ := c.Load("t.yaml", []byte(src))
		fromFile, _ := New(dir).Load("t.yaml", []byte(src))
		encoded, err := DecodeValidated("t.yaml", []byte(src), EncodeValidated(fresh))
		if err != nil {
			t.Fatal(err)
		}
		// A cached document whose positions were asked for already.
		located, _ := c.Load("t.yaml", []byte(src))
		located.PosOf("networks")
		for what, doc := range map[string]*spec.Document{"memory": fromMemory, "file": fromFile, "encoded": encoded, "located": located} {
			got, err := spec.PinVNIs(doc, nil)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			sameDocument(t, what, got, ref)
		}
		// The pinned document, kept and read back, pins to itself.
		c.Add(want)
		kept, ok := c.lookup("t.yaml", want.Source)
		if !ok {
			t.Fatal("the pinned document was not kept")
		}
		again, err := spec.PinVNIs(kept, want.Spec)
		if err != nil || string(again.Source) != string(want.Source) {
			t.Errorf("pinning the kept pinned document changed it (%v)", err)
		}
	}
}
