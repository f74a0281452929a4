package api

import (
	_ "embed"
	"net/http"
)

// openAPIDoc describes every route; TestOpenAPIMatchesRoutes keeps the two
// in step.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3 document of the API.
func OpenAPI() []byte { return openAPIDoc }

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request, _ string) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPIDoc)
	return err
}
