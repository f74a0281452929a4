package service

import (
	"io"
	"os"
	"sync"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/store"
)

// warm is what a Local keeps between operations so that a server's next
// change does not pay again for what the last one learned: the store's
// value and the models of the last applies.
//
// Neither may show a state that is no longer true, whoever changed it:
//   - the store's value opens the file for each operation; what it
//     remembers is checked against the file before it is used (a head by a
//     hash of its stored bytes, the chunks it wrote by a token every write
//     makes anew), so a command run beside the server voids it;
//   - a model is used only for a record whose spec has the bytes it was
//     made of (reconcile.Memo);
//   - both belong to one file: when the path names another file (a
//     recovery replaced it, or the state directory was made again, maybe
//     with another store ID), both are dropped and the store opened again.
//
// It also keeps what the kernel was found to have (dataplane.Features),
// which no other process can take away short of a failed step, which
// forgets it.
type warm struct {
	mu   sync.Mutex
	st   *store.Bolt
	file os.FileInfo // st's file, as it was when st was opened
	memo *reconcile.Memo
	// features is what the last operation's dataplane knew of the kernel.
	features dataplane.Features
}

// kernel returns what the last operation's dataplane knew of the kernel.
func (w *warm) kernel() dataplane.Features {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.features
}

// keepKernel keeps what an operation's dataplane knows of the kernel at
// its end: less than before when one of its steps failed.
func (w *warm) keepKernel(f dataplane.Features) {
	w.mu.Lock()
	w.features = f
	w.mu.Unlock()
}

// get returns the store's value and the memo of models, opening the store
// in dir again when its file is not the one they were kept for; a value
// opened traces its writes to trace (nil: nowhere).
func (w *warm) get(dir string, trace io.Writer) (*store.Bolt, *reconcile.Memo, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.st != nil {
		if fi, err := os.Stat(w.st.File()); err == nil && os.SameFile(fi, w.file) {
			return w.st, w.memo, nil
		}
	}
	st, err := store.OpenBolt(dir)
	if err != nil {
		return nil, nil, err
	}
	st.Trace = trace
	fi, err := os.Stat(st.File())
	if err != nil {
		return nil, nil, err
	}
	// A replaced value may still hold an infrastructure's lock for an
	// operation under way: that operation's unlock releases it.
	w.st, w.file, w.memo = st, fi, &reconcile.Memo{}
	return st, w.memo, nil
}

// drop forgets what is kept and releases the locks the store's value
// holds.
func (w *warm) drop() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.st
	w.st, w.file, w.memo = nil, nil, nil
	if st == nil {
		return nil
	}
	return st.Close()
}
