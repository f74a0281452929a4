package etcdstore

import (
	"fmt"

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
