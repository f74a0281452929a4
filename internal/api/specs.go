package api

import (
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/store"
)

// storedSpecs keeps, in memory, the specs this server loaded, stored or
// read back: the server lives long and reads the same stored specs again
// for every status, plan, metrics scrape and agents listing, and a large
// spec's YAML costs a few hundred milliseconds to decode each time.
var storedSpecs = speccache.New("")

// storedDoc is rec.Doc, from the spec's stored encoding or storedSpecs.
func storedDoc(rec *store.Record) (*spec.Document, error) { return rec.DocVia(storedSpecs) }
