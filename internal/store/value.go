package store

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/vnet-project/vnet/internal/spec"
)

// A record is stored, in etcd and in the local store alike, in one of two
// forms. A small one is its JSON, which etcdctl and bbolt's tools show as
// it is. A large one, whose JSON would exceed compressAbove, is
// compressed: every change of one network in a large spec writes the whole
// record (to etcd's disk and every agent, to each agent's own store and
// its good copy), so its size is what such a change costs. The compressed
// form is
//
//	ValueMagic, valueVersion
//	uvarint   the length of what the zstd frames decompress to
//	zstd frames, one or more, read one after another, of:
//	    uvarint length, the record's JSON without Spec and SpecEncoded
//	    uvarint length+1 (0: nil), Spec
//	    uvarint length+1 (0: nil), SpecEncoded
//
// which spares the base64 that JSON would put around the two byte fields:
// 4/3 of their size before compression, and most of the time a reader
// spent decoding the JSON. The local store keeps a large spec in chunks
// beside the record (see specchunks.go), and the record as version
// valueChunked of the same form, whose second field is the spec's manifest
// instead of the spec; a reader of version 1 alone refuses it, saying it
// was written by a newer vnet, rather than read the record without its
// spec.
const (
	// ValueMagic starts a record in the compressed form; JSON starts with
	// '{'.
	ValueMagic   = "\x89VNR"
	valueVersion = 1
	valueChunked = 2
	// compressAbove is the size of JSON from which a record is compressed.
	compressAbove = 64 << 10
	// MaxValuePayload bounds what a compressed record decompresses to: a
	// spec of at most spec.MaxSpecBytes, its compact encoding (about 0.6 of
	// it, kept only while the whole stays within the bound) and the rest of
	// the record. A reader refuses a value that claims more rather than
	// allocate what a damaged or hostile value asks for.
	MaxValuePayload = 4*spec.MaxSpecBytes + 1<<20
)

var (
	// The encoder and decoder hold large tables, made once and shared:
	// EncodeAll and DecodeAll may run concurrently.
	recordEncoder = sync.OnceValue(func() *zstd.Encoder {
		// The fastest level compresses vnet's specs as well as the
		// default does (10,000 networks to a twelfth of the record's
		// JSON) in less time.
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			panic(fmt.Sprintf("zstd encoder: %v", err))
		}
		return e
	})
	recordDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxValuePayload), zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderConcurrency(0))
		if err != nil {
			panic(fmt.Sprintf("zstd decoder: %v", err))
		}
		return d
	})
)

// EncodeValue makes the value a record is stored as: its JSON while it is
// small, or while the record is too large to compress within
// MaxValuePayload even without its spec's encoding (the store's own limits
// then decide), compressed else; a record whose encoding would take it
// beyond MaxValuePayload is compressed without the encoding.
func EncodeValue(r *Record) ([]byte, error) {
	head := *r
	head.Spec, head.SpecEncoded = nil, nil
	hj, err := marshalRecord(&head, nil)
	if err != nil {
		return nil, err
	}
	asJSON := len(hj) + base64.StdEncoding.EncodedLen(len(r.Spec)) + base64.StdEncoding.EncodedLen(len(r.SpecEncoded))
	payload := recordPayloadLen(len(hj), r.Spec, r.SpecEncoded)
	if payload > MaxValuePayload && r.SpecEncoded != nil {
		r = r.WithoutEncoding()
		payload = recordPayloadLen(len(hj), r.Spec, nil)
	}
	if asJSON <= compressAbove || payload > MaxValuePayload {
		return marshalRecord(r, nil)
	}
	return compressValue(valueVersion, hj, r.Spec, r.SpecEncoded, payload), nil
}

// encodeChunkedValue is the value of a record whose spec the local store
// keeps in chunks: the compressed form, version valueChunked, holding
// the spec's manifest where version 1 holds the spec; ns (nil: none) is
// what the store last wrote of the record's namespaces' IDs; laps (nil:
// none) times its JSON and its compression.
func encodeChunkedValue(r *Record, manifest []byte, ns *namespacesJSON, laps *writeLaps) ([]byte, error) {
	head := *r
	head.Spec, head.SpecEncoded = nil, nil
	hj, err := marshalRecord(&head, ns)
	if err != nil {
		return nil, err
	}
	laps.lap("value's JSON (%d bytes)", len(hj))
	enc := r.SpecEncoded
	payload := recordPayloadLen(len(hj), manifest, enc)
	if payload > MaxValuePayload {
		enc = nil
		payload = recordPayloadLen(len(hj), manifest, nil)
	}
	raw := rawValue(hj, manifest, enc, payload)
	nj, frame, ok := ns.frame()
	laps.lap("namespaces' frame (%d bytes)", len(frame))
	if ok && bytes.HasSuffix(hj[:len(hj)-1], nj) {
		// The namespaces' IDs, most of the record's bytes, are those of
		// the last write, whose frame is kept: the rest of the record
		// goes in a frame before it and one after, which a reader
		// decompresses as one (zstd reads frames one after another).
		at := len(binary.AppendUvarint(nil, uint64(len(hj)))) + len(hj) - 1 - len(nj)
		v := valueHeader(valueChunked, len(raw), payload)
		v = recordEncoder().EncodeAll(raw[:at], v)
		v = append(v, frame...)
		v = recordEncoder().EncodeAll(raw[at+len(nj):], v)
		laps.lap("value compressed around it (%d bytes)", len(v))
		return v, nil
	}
	v := compressRaw(valueChunked, raw, payload)
	laps.lap("value compressed whole (%d bytes)", len(v))
	return v, nil
}

// marshalRecord is json.Marshal(r), byte for byte, with the namespaces'
// IDs written by ns (nil: anew), which encoding/json would sort through
// reflection: for a record of a thousand namespaces, more than the rest
// of its JSON costs.
func marshalRecord(r *Record, ns *namespacesJSON) ([]byte, error) {
	if r.Namespaces == nil {
		return json.Marshal(r)
	}
	if ns == nil {
		ns = &namespacesJSON{}
	}
	nj, ok := ns.encode(r.Namespaces)
	if !ok {
		return json.Marshal(r)
	}
	rest := *r
	rest.Namespaces = nil
	b, err := json.Marshal(&rest)
	if err != nil {
		return nil, err
	}
	// Namespaces is the last field JSON writes, and JSON leaves it out
	// when nil (omitempty): it goes before the closing brace.
	b = slices.Grow(b[:len(b)-1], len(`,"namespaces":}`)+len(nj))
	b = append(b, `,"namespaces":`...)
	b = append(b, nj...)
	return append(b, '}'), nil
}

// compressValue makes the compressed form of a record's head JSON and its
// two byte fields.
func compressValue(version byte, hj, spec, encoded []byte, payload int) []byte {
	return compressRaw(version, rawValue(hj, spec, encoded, payload), payload)
}

// rawValue is what the compressed form compresses.
func rawValue(hj, spec, encoded []byte, payload int) []byte {
	raw := make([]byte, 0, payload)
	raw = binary.AppendUvarint(raw, uint64(len(hj)))
	raw = append(raw, hj...)
	raw = appendField(raw, spec)
	// JSON leaves an empty encoding out (omitempty): it reads back nil.
	return appendField(raw, nilIfEmpty(encoded))
}

func compressRaw(version byte, raw []byte, payload int) []byte {
	return recordEncoder().EncodeAll(raw, valueHeader(version, len(raw), payload))
}

// valueHeader starts the compressed form of raw bytes of size.
func valueHeader(version byte, size, payload int) []byte {
	v := make([]byte, 0, len(ValueMagic)+1+binary.MaxVarintLen64+payload/4)
	v = append(v, ValueMagic...)
	v = append(v, version)
	return binary.AppendUvarint(v, uint64(size))
}

func recordPayloadLen(head int, fields ...[]byte) int {
	n := binary.MaxVarintLen64 + head
	for _, f := range fields {
		n += binary.MaxVarintLen64 + len(f)
	}
	return n
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// appendField writes b with its length, telling nil from empty as JSON
// does (null and "").
func appendField(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendUvarint(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	return append(dst, b...)
}

// DecodeValue reads a value in either form: JSON, as every build of vnet
// writes small records and earlier builds wrote all of them, or
// compressed. The record returned refers to no part of val.
func DecodeValue(val []byte) (*Record, error) {
	if !IsCompressedValue(val) {
		r := &Record{}
		if err := json.Unmarshal(val, r); err != nil {
			return nil, fmt.Errorf("not a vnet record: %w", err)
		}
		return r, nil
	}
	r, manifest, err := decodeCompressed(val[len(ValueMagic):])
	if err == nil && manifest != nil {
		err = errors.New("its spec is kept in chunks beside it, which only the local store reads")
	}
	if err != nil {
		return nil, fmt.Errorf("compressed vnet record: %w", err)
	}
	return r, nil
}

// decodeStored reads a value of the local store: DecodeValue's forms, or
// a record whose spec is kept in chunks, whose manifest it returns.
func decodeStored(val []byte) (r *Record, manifest []byte, err error) {
	if !IsCompressedValue(val) {
		r, err = DecodeValue(val)
		return r, nil, err
	}
	r, manifest, err = decodeCompressed(val[len(ValueMagic):])
	if err != nil {
		return nil, nil, fmt.Errorf("compressed vnet record: %w", err)
	}
	return r, manifest, nil
}

// IsCompressedValue says val is a record in the compressed form.
func IsCompressedValue(val []byte) bool { return bytes.HasPrefix(val, []byte(ValueMagic)) }

var errTruncated = errors.New("damaged: truncated")

// decodeCompressed reads the compressed form; of version valueChunked,
// the record without its spec and the spec's manifest (non-nil).
func decodeCompressed(val []byte) (*Record, []byte, error) {
	r, manifest, err := decodeCompressedForm(val)
	if err == nil && val[0] == valueChunked && manifest == nil {
		err = errors.New("damaged: no manifest of its spec")
	}
	return r, manifest, err
}

func decodeCompressedForm(val []byte) (*Record, []byte, error) {
	if len(val) == 0 {
		return nil, nil, errTruncated
	}
	version := val[0]
	if version != valueVersion && version != valueChunked {
		return nil, nil, fmt.Errorf("format version %d, which this build of vnet does not read (versions %d and %d): written by a newer vnet?",
			version, valueVersion, valueChunked)
	}
	size, n := binary.Uvarint(val[1:])
	if n <= 0 {
		return nil, nil, errTruncated
	}
	if size > MaxValuePayload {
		return nil, nil, fmt.Errorf("damaged: says it holds %d bytes, above the %d MiB a record may hold", size, MaxValuePayload>>20)
	}
	raw, err := recordDecoder().DecodeAll(val[1+n:], make([]byte, 0, size))
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded) || err == nil && uint64(len(raw)) != size:
		return nil, nil, fmt.Errorf("damaged: holds more or less than the %d bytes it says", size)
	case err != nil:
		return nil, nil, fmt.Errorf("damaged: %w", err)
	}
	head, raw, err := readField(raw, false)
	if err != nil {
		return nil, nil, err
	}
	r := &Record{}
	if err := json.Unmarshal(head, r); err != nil {
		return nil, nil, fmt.Errorf("damaged: %w", err)
	}
	var spec []byte
	if spec, raw, err = readField(raw, true); err != nil {
		return nil, nil, err
	}
	if r.SpecEncoded, raw, err = readField(raw, true); err != nil {
		return nil, nil, err
	}
	if len(raw) != 0 {
		return nil, nil, fmt.Errorf("damaged: %d bytes after the record", len(raw))
	}
	if version == valueChunked {
		return r, spec, nil
	}
	r.Spec = spec
	return r, nil, nil
}

// readField reads one length-prefixed field off b; with nilable, the
// length is one more than the field's, and 0 means nil.
func readField(b []byte, nilable bool) (field, rest []byte, err error) {
	l, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, nil, errTruncated
	}
	b = b[n:]
	if nilable {
		if l == 0 {
			return nil, b, nil
		}
		l--
	}
	if l > uint64(len(b)) {
		return nil, nil, errTruncated
	}
	// A field of its own capacity, so that a caller appending to it cannot
	// write over the next.
	return b[:l:l], b[l:], nil
}
