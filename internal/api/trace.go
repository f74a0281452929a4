package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// A change's laps in the handler (Config.Trace, VNET_TRACE): the time a
// request spends around the service's own laps, in the same form, so that
// the log shows where a change's time goes from the handler's first step
// to its answer.

type stopwatchKey struct{}

// stopwatch is the time of a request's last lap, and where laps go. One
// request's handler runs on one goroutine: it needs no lock.
type stopwatch struct {
	w    io.Writer
	last time.Time
}

// withStopwatch is ctx with laps written to w, counted from start.
func withStopwatch(ctx context.Context, w io.Writer, start time.Time) context.Context {
	return context.WithValue(ctx, stopwatchKey{}, &stopwatch{w: w, last: start})
}

// lap writes the time since the request's last lap under label, when the
// server traces changes; otherwise nothing.
func lap(r *http.Request, label string) {
	sw, ok := r.Context().Value(stopwatchKey{}).(*stopwatch)
	if !ok {
		return
	}
	now := time.Now()
	fmt.Fprintf(sw.w, "%8.1f ms  %s\n", float64(now.Sub(sw.last).Microseconds())/1000, label)
	sw.last = now
}
