package api

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"runtime"
	"time"

	"golang.org/x/sync/semaphore"
)

// What many large PUTs at once may hold is bounded twice, by bytes rather
// than by requests, so that many small specs still go through together:
//
//   - bodies: the bytes of bodies being read or held, at most bodyBudget
//     times the largest body. A PUT takes its share (its Content-Length,
//     or the largest body when it does not say) before it reads a byte,
//     and gives it back when it is answered; one that waits longer than
//     half the request timeout is answered 503.
//   - decoding: the bytes of bodies being decoded as specs, at most
//     decodeBudget times the largest body. Decoding takes some 45 times
//     the spec's size (a 3 MB spec holds some 140 MB while it is
//     decoded), so this is where the memory goes.
//
// A body is read before its turn to decode, so a slow client holds
// body bytes (for at most the request timeout) but no turn to decode.
const (
	bodyBudget   = 4
	decodeBudget = 1
)

type budgets struct {
	bodies, decoding *semaphore.Weighted
	max              int64 // the largest body
	bodyWait         time.Duration
}

func newBudgets(maxBody int64, requestTimeout time.Duration) *budgets {
	return &budgets{bodies: semaphore.NewWeighted(bodyBudget * maxBody), decoding: semaphore.NewWeighted(decodeBudget * maxBody),
		max: maxBody, bodyWait: requestTimeout / 2}
}

var errBusy = busy("the server is busy with other large requests; try again")

// readBody reads a body of at most b.max bytes within the bodies' budget;
// release gives its share back, once the body is no longer needed.
func (b *budgets) readBody(w http.ResponseWriter, r *http.Request, tooLarge func() error) (body []byte, release func(), err error) {
	return b.readBodyUpTo(w, r, b.max, tooLarge)
}

// readBodyUpTo is readBody for a body of at most limit bytes (a snapshot,
// which holds a spec and more). Its share is capped at the whole budget,
// so a body larger than it still gets its turn, alone.
func (b *budgets) readBodyUpTo(w http.ResponseWriter, r *http.Request, limit int64, tooLarge func() error) (body []byte, release func(), err error) {
	share := r.ContentLength
	if share < 0 || share > limit {
		share = limit
	}
	share = min(share, bodyBudget*b.max)
	ctx, cancel := context.WithTimeout(r.Context(), b.bodyWait)
	defer cancel()
	if err := b.bodies.Acquire(ctx, share); err != nil {
		return nil, nil, errBusy
	}
	release = func() { b.bodies.Release(share) }
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength)) // one allocation, not a doubling one
	}
	_, err = buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		release()
		return nil, nil, tooLarge()
	case err != nil:
		release()
		return nil, nil, fail(http.StatusBadRequest, "read the body: "+err.Error())
	}
	return buf.Bytes(), release, nil
}

// decode runs fn, the decoding of body, once its bytes fit in the
// decoding budget; a client that gives up meanwhile is answered 503.
func (b *budgets) decode(ctx context.Context, body []byte, fn func() error) error {
	share := min(int64(len(body)), b.max)
	if err := b.decoding.Acquire(ctx, share); err != nil {
		return errBusy
	}
	defer b.decoding.Release(share)
	err := fn()
	if share >= collectAfter {
		// What decoding left is garbage by now; collecting it before the
		// next decode begins lets that one reuse the memory rather than
		// grow the heap by as much again, as the collector's pacing
		// would allow.
		runtime.GC()
	}
	return err
}

// collectAfter is the size of a body after whose decoding the garbage is
// collected at once: a spec's decoding leaves some 45 times its size.
const collectAfter = 1 << 20
