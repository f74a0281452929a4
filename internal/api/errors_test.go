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
	}{
		{fmt.Errorf("apply x: %w", store.ErrLocked), http.StatusServiceUnavailable},
		{fmt.Errorf("state store held: %w", fmt.Errorf("open: %w", store.ErrLocked)), http.StatusServiceUnavailable},
		{fmt.Errorf("%q: %w", "x", store.ErrNotFound), http.StatusNotFound},
		{fmt.Errorf("apply x: %w", etcdstore.ErrConflict), http.StatusConflict},
		{fmt.Errorf("etcd: %w", etcdstore.ErrUnavailable), http.StatusServiceUnavailable},
		{fmt.Errorf("bad: %w", spec.ErrInvalid), http.StatusBadRequest},
		{fmt.Errorf("run: %w", service.ErrBusy), http.StatusConflict},
		{fmt.Errorf("runs: %w", service.ErrTooMany), http.StatusTooManyRequests},
		{service.Invalid("--wait needs --etcd"), http.StatusBadRequest},
		{fmt.Errorf("ioc: %w", service.ErrNotHere), http.StatusNotImplemented},
		{fmt.Errorf("stats: %w", service.ErrNoSamples), http.StatusServiceUnavailable},
		{errors.New("the text says it is locked, but no sentinel"), http.StatusInternalServerError},
	} {
		if got := classify(c.err).status; got != c.want {
			t.Errorf("classify(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
