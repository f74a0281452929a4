package api

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// Each status an error earns comes from its sentinel, however it is worded
// and wrapped.
func TestClassifyBySentinel(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
		code string
	}{
		{fmt.Errorf("apply x: %w", store.ErrLocked), http.StatusServiceUnavailable, CodeLocked},
		{fmt.Errorf("state store held: %w", fmt.Errorf("open: %w", store.ErrLocked)), http.StatusServiceUnavailable, CodeLocked},
		{fmt.Errorf("%q: %w", "x", store.ErrNotFound), http.StatusNotFound, ""},
		{fmt.Errorf("apply x: %w", etcdstore.ErrConflict), http.StatusConflict, ""},
		{fmt.Errorf("etcd: %w", etcdstore.ErrUnavailable), http.StatusServiceUnavailable, CodeUnavailable},
		{fmt.Errorf("bad: %w", spec.ErrInvalid), http.StatusBadRequest, ""},
		{fmt.Errorf("run: %w", service.ErrBusy), http.StatusConflict, ""},
		{fmt.Errorf("runs: %w", service.ErrTooMany), http.StatusTooManyRequests, ""},
		{service.Invalid("--wait needs --etcd"), http.StatusBadRequest, ""},
		{fmt.Errorf("ioc: %w", service.ErrNotHere), http.StatusNotImplemented, ""},
		{fmt.Errorf("stats: %w", service.ErrNoSamples), http.StatusServiceUnavailable, CodeNoSamples},
		{errors.New("the text says it is locked, but no sentinel"), http.StatusInternalServerError, ""},
	} {
		got := classify(c.err)
		if got.status != c.want || got.body.Code != c.code {
			t.Errorf("classify(%v) = %d %q, want %d %q", c.err, got.status, got.body.Code, c.want, c.code)
		}
	}
}

// A client tells a 503's reasons apart by the answer's code, and takes
// one without a code (an older server's) as a held store.
func TestClientTellsUnavailableReasons(t *testing.T) {
	for _, c := range []struct {
		code string
		want error
	}{
		{CodeLocked, service.ErrLocked},
		{CodeUnavailable, service.ErrUnavailable},
		{CodeNoSamples, service.ErrNoSamples},
		{"", service.ErrLocked},
	} {
		err := &Error{Status: http.StatusServiceUnavailable, Body: ErrorBody{Error: "x", Code: c.code}}
		if !errors.Is(err, c.want) {
			t.Errorf("a 503 with code %q: %v is not %v", c.code, err, c.want)
		}
	}
	// Through classify and back: the sentinel a face matched on the
	// server is the one its client matches.
	for _, sentinel := range []error{service.ErrLocked, service.ErrUnavailable, service.ErrNoSamples} {
		h := classify(fmt.Errorf("wrapped: %w", sentinel))
		if err := (&Error{Status: h.status, Body: h.body}); !errors.Is(err, sentinel) {
			t.Errorf("%v through the API came back as %v", sentinel, err.Unwrap())
		}
	}
}
