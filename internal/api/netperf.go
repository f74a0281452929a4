package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"

	"github.com/vnet-project/vnet/internal/service"
)

// maxNetperfBody bounds a netperf run's request.
const maxNetperfBody = 16 << 10

var runID = regexp.MustCompile(`^[0-9]{1,9}$`)

// startNetperf checks a run's request against the applied spec, admits it
// and starts it; the answer (202) is the run as it starts.
func (s *Server) startNetperf(w http.ResponseWriter, r *http.Request, who string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	req, err := decodeNetperf(w, r)
	if err != nil {
		return err
	}
	run, err := s.runs.Start(s.runsCtx, name, who, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/netperf/"+run.ID)
	writeJSON(w, http.StatusAccepted, run)
	return nil
}

func decodeNetperf(w http.ResponseWriter, r *http.Request) (*NetperfRequest, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxNetperfBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", maxNetperfBody))
	case err != nil:
		return nil, fail(http.StatusBadRequest, "read the body: "+err.Error())
	}
	return DecodeNetperf(body)
}

// DecodeNetperf reads a run's request: JSON, no unknown fields.
func DecodeNetperf(body []byte) (*NetperfRequest, error) {
	var req NetperfRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, failField(http.StatusBadRequest, te.Field, "want a "+te.Type.String())
		}
		return nil, fail(http.StatusBadRequest, "the body is not a netperf request (JSON): "+err.Error())
	}
	if dec.More() {
		return nil, fail(http.StatusBadRequest, "the body holds more than one JSON value")
	}
	return &req, nil
}

func (s *Server) getNetperf(w http.ResponseWriter, r *http.Request, _ string) error {
	id := r.PathValue("id")
	if !runID.MatchString(id) {
		return failField(http.StatusBadRequest, "id", "a run's id is a number")
	}
	run, ok := s.runs.Get(id)
	if !ok {
		return fail(http.StatusNotFound, "no netperf run "+id+" (runs are kept in memory, the last "+strconv.Itoa(service.KeptNetperfRuns)+")")
	}
	writeJSON(w, http.StatusOK, run)
	return nil
}

func (s *Server) listNetperf(w http.ResponseWriter, r *http.Request, _ string) error {
	writeJSON(w, http.StatusOK, s.runs.Newest(queryOf(r).string("infra")))
	return nil
}
