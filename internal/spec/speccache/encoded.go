package speccache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"

	"github.com/vnet-project/vnet/internal/spec"
)

// EncodeValidated is the compact form of a document that validated (as
// spec.Load, a Cache or spec.PinVNIs returned it), for storing beside its YAML: a
// reader with DecodeValidated then makes the same document without
// decoding and validating the YAML. It is the form the cache keeps in its
// files, bound to the SHA-256 of doc.Source and to the layout of this
// build's Spec. A document that did not validate has none: nil.
func EncodeValidated(doc *spec.Document) []byte {
	if doc == nil || !doc.Validated() || len(doc.Source) > spec.MaxSpecBytes {
		return nil
	}
	return frame(sha256.Sum256(doc.Source), encodeCached(doc))
}

// DecodeValidated is spec.Load(file, src), made from encoded when encoded is
// what EncodeValidated made of these very bytes in a build whose Spec has
// the same layout. Any other encoding (of other bytes, by another layout,
// damaged, or none) is ignored, and the YAML is loaded as ever, with its
// errors.
func DecodeValidated(file string, src, encoded []byte) (*spec.Document, error) {
	if doc, ok := fromEncoding(file, src, encoded); ok {
		return doc, nil
	}
	return spec.Load(file, src)
}

func fromEncoding(file string, src, encoded []byte) (*spec.Document, bool) {
	if len(encoded) == 0 || len(src) > spec.MaxSpecBytes {
		return nil, false
	}
	body, ok := unframe(sha256.Sum256(src), encoded)
	if !ok {
		return nil, false
	}
	doc, err := decodeCached(file, src, body)
	if err != nil {
		return nil, false
	}
	return doc, true
}

// frame puts the header of src's SHA-256 and a CRC-32C before an encoded
// spec: the form of the cache's files and of EncodeValidated.
func frame(sum [sha256.Size]byte, encoded []byte) []byte {
	data := binary.BigEndian.AppendUint32(header(sum), crc32.Checksum(encoded, castagnoli))
	return append(data, encoded...)
}

// unframe is the encoded spec of a frame, when the frame is of the source
// whose SHA-256 is sum, in this layout, and undamaged.
func unframe(sum [sha256.Size]byte, data []byte) ([]byte, bool) {
	h := header(sum)
	if !bytes.HasPrefix(data, h) || len(data) < len(h)+checksumSize {
		return nil, false
	}
	encoded := data[len(h)+checksumSize:]
	if binary.BigEndian.Uint32(data[len(h):]) != crc32.Checksum(encoded, castagnoli) {
		return nil, false
	}
	return encoded, true
}
