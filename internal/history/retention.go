package history

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The errors of this package, matched with errors.Is.
var (
	ErrNotFound = errors.New("not in the history")
	ErrUnknown  = errors.New("unknown")
	ErrInvalid  = errors.New("invalid")
)

// DefaultMaxEntries is how many entries an infrastructure keeps when its
// retention says nothing: every entry holds a spec (up to spec.MaxSpecBytes,
// most a few KB), so the history of a large one stays within a few hundred
// times its spec.
const DefaultMaxEntries = 100

// MaxEntriesLimit bounds what a retention may ask for.
const MaxEntriesLimit = 10000

// Retention bounds a history by count, by age, or both. The zero value
// keeps DefaultMaxEntries, of any age.
type Retention struct {
	// MaxEntries is how many entries to keep, 1..MaxEntriesLimit; 0 means
	// DefaultMaxEntries.
	MaxEntries int `json:"max_entries,omitempty" yaml:"max_entries,omitempty"`
	// MaxAge drops entries older than it; 0 keeps entries of any age.
	MaxAge time.Duration `json:"max_age,omitempty" yaml:"max_age,omitempty"`
}

// Validate refuses a retention no history can follow.
func (r Retention) Validate() error {
	switch {
	case r.MaxEntries < 0 || r.MaxEntries > MaxEntriesLimit:
		return fmt.Errorf("history retention: %d entries: %w: want 1 to %d (0 for the default, %d)", r.MaxEntries, ErrInvalid, MaxEntriesLimit, DefaultMaxEntries)
	case r.MaxAge < 0:
		return fmt.Errorf("history retention: age %s: %w: want a positive age, or 0 for any", r.MaxAge, ErrInvalid)
	}
	return nil
}

func (r Retention) maxEntries() int {
	if r.MaxEntries == 0 {
		return DefaultMaxEntries
	}
	return r.MaxEntries
}

// Prune returns the entries the retention keeps and those it drops, each
// in Seq order. The entry of the current generation (inForce: the one
// that holds the spec in force) is always kept, and counts
// among MaxEntries; the others are kept newest first while the count
// allows and they are no older than MaxAge at now. current is 0 when the
// infrastructure no longer exists: then nothing is kept for being current.
func (r Retention) Prune(entries []Entry, current int, now time.Time) (kept, dropped []Entry) {
	sorted := append([]Entry(nil), entries...)
	Sort(sorted)
	pinned := inForce(sorted, current)
	budget := r.maxEntries()
	if pinned >= 0 {
		budget--
	}
	keep := make([]bool, len(sorted))
	for i := len(sorted) - 1; i >= 0; i-- {
		switch {
		case i == pinned:
			keep[i] = true
		case budget > 0 && (r.MaxAge == 0 || now.Sub(sorted[i].At) <= r.MaxAge):
			keep[i] = true
			budget--
		}
	}
	for i, e := range sorted {
		if keep[i] {
			kept = append(kept, e)
		} else {
			dropped = append(dropped, e)
		}
	}
	return kept, dropped
}

// DropsOldest is Prune told from how many entries a history holds and
// which is its newest (the highest Seq), without the others, where that is
// enough: with no MaxAge, and either room for every entry, nothing in force
// (current 0), or newest the entry in force, Prune drops the oldest drop
// entries and keeps the rest. ok is false where Prune must see the entries
// (an age, or an older entry that may be the one in force).
func (r Retention) DropsOldest(count int, newest Entry, current int) (drop int, ok bool) {
	if r.MaxAge != 0 {
		return 0, false
	}
	if count <= r.maxEntries() {
		return 0, true
	}
	if current > 0 && (newest.Generation != current || !newest.holdsSpec()) {
		return 0, false
	}
	return count - r.maxEntries(), true
}

// ParseAge reads a retention's age as people write it: a Go duration
// (720h, 90m) or a number of days or weeks (30d, 2w).
func ParseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil || !(v > 0) || v*float64(unit) > float64(1<<62) {
				return 0, fmt.Errorf("history age %q: %w: want a positive number of days or weeks, e.g. 30d", s, ErrInvalid)
			}
			return time.Duration(v * float64(unit)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("history age %q: %w: want a positive age, e.g. 30d, 2w or 720h", s, ErrInvalid)
	}
	return d, nil
}

// inForce is the index, in entries sorted by Seq, of the entry that holds
// the current generation's spec: the newest of that generation that holds
// one (a pause or resume after it keeps the generation but holds none),
// else the newest of that generation; -1 when current is 0 or has none.
func inForce(sorted []Entry, current int) int {
	newest := -1
	for i := len(sorted) - 1; i >= 0 && current > 0; i-- {
		if sorted[i].Generation != current {
			continue
		}
		if sorted[i].holdsSpec() {
			return i
		}
		if newest < 0 {
			newest = i
		}
	}
	return newest
}
