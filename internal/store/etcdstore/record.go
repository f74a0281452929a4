package etcdstore

import (
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/vnet-project/vnet/internal/store"
)

// MaxEncodedRecord is the largest value, as stored (compressed or not),
// that a record is stored as with its spec's compact encoding
// (store.Record.SpecEncoded); a larger one is stored without it, as its
// YAML alone, within the 8 MiB this client sends. The encoding only
// spares the agents decoding the YAML.
const MaxEncodedRecord = 7 << 20

// encodeRecord makes the value a record is stored as (store.EncodeValue:
// compressed when large), without its spec's encoding when that would not
// fit.
func encodeRecord(r *store.Record) (string, error) {
	if err := checkName("infrastructure", r.Name); err != nil {
		return "", err
	}
	if r.Damage != nil {
		return "", fmt.Errorf("encode %s: a damaged record holds nothing to store: %w", r.Name, store.ErrDamagedRecord)
	}
	v, err := store.EncodeValue(r)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", r.Name, err)
	}
	if len(v) > MaxEncodedRecord && r.SpecEncoded != nil {
		return encodeRecord(r.WithoutEncoding())
	}
	return string(v), nil
}

// decodeRecord reads a value in either form (store.DecodeValue).
func decodeRecord(key, val []byte) (*store.Record, error) {
	r, err := store.DecodeValue(val)
	if err != nil {
		return nil, fmt.Errorf("etcd key %s: %w", key, err)
	}
	return r, nil
}

// recordOf is the record of infrastructure name stored as kv, or, when
// the value does not read as that infrastructure's record (random bytes,
// a cut value, a record of another name), a damaged record saying why
// (store.Damaged): one bad value is its own infrastructure's problem, not
// every reader's.
func recordOf(name string, kv *mvccpb.KeyValue) *store.Record {
	r, err := decodeRecord(kv.Key, kv.Value)
	switch {
	case err != nil:
		return store.Damaged(name, err)
	case r.Name != name:
		return store.Damaged(name, fmt.Errorf("etcd key %s holds the record of %q", kv.Key, r.Name))
	}
	return r
}
