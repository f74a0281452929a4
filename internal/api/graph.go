package api

import (
	"bytes"
	"net/http"

	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/topology"
)

// graphFormats are the formats of an infrastructure's topology: what
// writes each (nil: JSON) and its content type.
var graphFormats = map[string]struct {
	write func(*topology.Graph, *bytes.Buffer) error
	ctype string
}{
	"json": {nil, "application/json"},
	"svg":  {func(g *topology.Graph, b *bytes.Buffer) error { return g.WriteSVG(b) }, "image/svg+xml"},
	"dot":  {func(g *topology.Graph, b *bytes.Buffer) error { return g.WriteDOT(b) }, "text/vnd.graphviz; charset=utf-8"},
}

// graphFormatNames are ?format's values, the default first.
var graphFormatNames = []string{"json", "svg", "dot"}

// graph draws an infrastructure's topology, as vnet graph does:
// ?format=json (the default), svg or dot. ?v= is not read: a page that
// shows the picture changes it to have it fetched again.
func (s *Server) graph(w http.ResponseWriter, r *http.Request, _ string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	f := graphFormats[queryOf(r).string("format")] // checked against graphFormatNames
	var g *topology.Graph
	if err := s.withKernel(r.Context(), func() (err error) { g, err = service.Topology(r.Context(), s.be, name); return }); err != nil {
		return err
	}
	if f.write == nil {
		writeJSON(w, http.StatusOK, g)
		return nil
	}
	var buf bytes.Buffer
	if err := f.write(g, &buf); err != nil {
		return err
	}
	w.Header().Set("Content-Type", f.ctype)
	_, err = w.Write(buf.Bytes())
	return err
}
