package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
)

// ErrorBody is every error the API answers: what went wrong and, for a
// spec, where (the first problem's field path and line; all of them in
// Problems).
type ErrorBody struct {
	Error    string    `json:"error"`
	Field    string    `json:"field,omitempty"`
	Line     int       `json:"line,omitempty"`
	Column   int       `json:"column,omitempty"`
	Problems []Problem `json:"problems,omitempty"`
	// Attached, when a rollback or an apply is refused for them (409),
	// are the VMs runtimes attached that its spec has no place for.
	Attached []service.AttachedVM `json:"attached,omitempty"`
	// Code, on a 503, says which of the reasons worth trying again it is
	// (CodeLocked, CodeUnavailable, CodeNoSamples), so that a client need
	// not read the message to tell them apart.
	Code string `json:"code,omitempty"`
}

// The reasons of a 503 (ErrorBody.Code).
const (
	// CodeLocked: another vnet command holds the state store or the
	// infrastructure.
	CodeLocked = "locked"
	// CodeUnavailable: the server's etcd is out of reach.
	CodeUnavailable = "unavailable"
	// CodeNoSamples: a stats window has too few samples yet.
	CodeNoSamples = "no-samples"
	// CodeBusy: the server has no room for the request now (too many
	// large bodies held, or too many requests at once).
	CodeBusy = "busy"
)

// Problem is one problem with one field of a spec.
type Problem struct {
	Field   string `json:"field,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}

// httpError is an error with the status to answer it with.
type httpError struct {
	status int
	body   ErrorBody
}

func (e *httpError) Error() string { return e.body.Error }

func fail(status int, msg string) *httpError {
	return &httpError{status: status, body: ErrorBody{Error: msg}}
}

func failField(status int, field, msg string) *httpError {
	return &httpError{status: status, body: ErrorBody{Error: field + ": " + msg, Field: field}}
}

// classify maps an engine or spec error to a status and body, by the
// sentinel it wraps.
func classify(err error) *httpError {
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	var errs spec.Errors
	var fe *spec.FieldError
	var re *service.RequestError
	var ae *service.AttachedError
	switch {
	case errors.As(err, &ae):
		return &httpError{status: http.StatusConflict, body: ErrorBody{Error: err.Error(), Attached: ae.VMs}}
	case errors.As(err, &errs) && len(errs) > 0:
		return specError(http.StatusBadRequest, err, errs)
	case errors.As(err, &fe):
		return specError(http.StatusBadRequest, err, spec.Errors{fe})
	case errors.As(err, &re):
		return failField(http.StatusBadRequest, re.Field, re.Msg)
	case errors.Is(err, service.ErrInvalid):
		return fail(http.StatusBadRequest, err.Error())
	case errors.Is(err, service.ErrNotFound):
		return fail(http.StatusNotFound, err.Error())
	case errors.Is(err, service.ErrConflict), errors.Is(err, service.ErrBusy), errors.Is(err, service.ErrExists):
		return fail(http.StatusConflict, err.Error())
	case errors.Is(err, service.ErrTooMany):
		return fail(http.StatusTooManyRequests, err.Error())
	case errors.Is(err, service.ErrUnavailable):
		return unavailable(CodeUnavailable, err)
	case errors.Is(err, service.ErrLocked):
		return unavailable(CodeLocked, err)
	case errors.Is(err, service.ErrNoSamples):
		return unavailable(CodeNoSamples, err)
	case errors.Is(err, service.ErrNotSupported), errors.Is(err, service.ErrNotHere):
		return fail(http.StatusNotImplemented, err.Error())
	}
	return fail(http.StatusInternalServerError, err.Error())
}

// unavailable is a 503: etcd out of reach, the state store or the
// infrastructure held by another vnet command, or no samples yet, each
// worth trying again.
func unavailable(code string, err error) *httpError {
	return &httpError{status: http.StatusServiceUnavailable, body: ErrorBody{Error: err.Error(), Code: code}}
}

// busy is a 503 for a request the server has no room for now.
func busy(msg string) *httpError {
	return &httpError{status: http.StatusServiceUnavailable, body: ErrorBody{Error: msg, Code: CodeBusy}}
}

func specError(status int, err error, errs spec.Errors) *httpError {
	body := ErrorBody{Error: err.Error(), Field: errs[0].Path, Line: errs[0].Pos.Line, Column: errs[0].Pos.Col}
	for _, e := range errs[:min(len(errs), spec.MaxReported)] {
		body.Problems = append(body.Problems, Problem{Field: e.Path, Line: e.Pos.Line, Column: e.Pos.Col, Message: e.Msg})
	}
	return &httpError{status: status, body: body}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	he := classify(err)
	if he.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="vnet"`)
	}
	if he.status == http.StatusServiceUnavailable || he.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "5")
	}
	writeJSON(w, he.status, he.body)
}
