package store

import (
	"fmt"
	"io"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A record's write traced (Bolt.Trace, VNET_TRACE): where its time goes,
// from the value's encoding to the good copy's commit, in the form of the
// engine's laps and indented under them, since the engine's "record: the
// store" lap holds them all.

// writeLaps times the parts of one write; nil times nothing.
type writeLaps struct {
	w    io.Writer
	last time.Time
}

// laps starts the laps of a write, nil when the store traces nothing.
func (b *Bolt) laps() *writeLaps {
	if b.Trace == nil {
		return nil
	}
	return &writeLaps{w: b.Trace, last: time.Now()}
}

// lap writes the time since the last lap under a label.
func (l *writeLaps) lap(format string, args ...any) {
	if l == nil {
		return
	}
	now := time.Now()
	fmt.Fprintf(l.w, "           %8.1f ms  store: %s\n", float64(now.Sub(l.last).Microseconds())/1000, fmt.Sprintf(format, args...))
	l.last = now
}

// committed writes the lap of a bolt commit on file, with what db's
// statistics say of it: db is opened for each write, so they are this
// transaction's alone. Rebalancing and spilling (the pages made of the
// changed nodes), writing them and the meta page with a sync after each
// ("write and sync"), and what remains: the freelist and any growth of
// the file, which syncs too.
func (l *writeLaps) committed(file string, db *bolt.DB) {
	if l == nil {
		return
	}
	s := db.Stats().TxStats
	took := time.Since(l.last)
	rest := took - s.GetRebalanceTime() - s.GetSpillTime() - s.GetWriteTime()
	l.lap("%s: commit (spill %.1f ms of %d nodes, %d splits; write and sync %.1f ms, %d writes of %d KiB; freelist and growth %.1f ms)",
		file, ms(s.GetRebalanceTime()+s.GetSpillTime()), s.GetSpill(), s.GetSplit(),
		ms(s.GetWriteTime()), s.GetWrite(), s.GetPageAlloc()>>10, ms(rest))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
