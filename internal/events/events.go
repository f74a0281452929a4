// Package events keeps what happened to infrastructures (applies and
// destroys, uplink failovers, LBT moves, team-wide limit splits) in a
// journal that outlives the processes writing it: the server that made
// a change and the agents that react to the network write to one file in
// the state directory, and the server reads it back. The journal is
// bounded: once it grows past MaxBytes its oldest half is dropped.
package events

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vnet-project/vnet/internal/atomicfile"
)

// The kinds of events.
const (
	Apply      = "apply"
	Destroy    = "destroy"
	Failover   = "failover"    // a port left an uplink that went down
	Failback   = "failback"    // a port went back to an uplink that came up (or was re-steered otherwise)
	LBTMove    = "lbt-move"    // load-based teaming moved a port off a busy uplink
	LimitSplit = "limit-split" // a team-wide limit was split anew between its uplinks
	Netperf    = "netperf"     // a measurement run through the API
	Rollback   = "rollback"    // an earlier generation applied again, as a new one
	Restore    = "restore"     // an infrastructure made anew from a snapshot
)

// Event is one thing that happened.
type Event struct {
	Time   time.Time `json:"time"`
	Action string    `json:"action"` // one of the kinds above
	Infra  string    `json:"infra"`
	Host   string    `json:"host,omitempty"`
	// Who made a change through the API (the token's name) and from where;
	// "agent" for what an agent did by itself.
	Who    string `json:"who"`
	Remote string `json:"remote,omitempty"`
	OK     bool   `json:"ok"`
	// Changes are the kernel actions an apply or destroy executed.
	Changes int     `json:"changes"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
	// Port, From and To say which port (VM/vNIC) or pool moved between
	// which uplinks, or for a limit split the rates before and after.
	Port    string `json:"port,omitempty"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Message string `json:"message,omitempty"`
}

// MaxBytes bounds a journal file; past it the oldest half goes.
const MaxBytes = 1 << 20

// maxLine bounds one event; a longer line is cut to its error's first part.
const maxLine = 8 << 10

// FileName is the journal's name in a state directory.
const FileName = "events.jsonl"

// Journal is an events file shared by processes: each append is one write
// of one line under an exclusive flock, and so is the trimming.
type Journal struct {
	Path     string
	MaxBytes int64 // MaxBytes when zero
}

// In is the journal of a state directory.
func In(stateDir string) *Journal { return &Journal{Path: filepath.Join(stateDir, FileName)} }

// Append adds one event.
func (j *Journal) Append(ev Event) error {
	line, err := encode(ev)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(j.Path), 0o755); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	f, err := j.openLocked()
	if err != nil {
		return err
	}
	defer f.Close() // and unlocks
	if endsTorn(f) {
		line = append([]byte{'\n'}, line...)
	}
	if _, err := f.Write(line); err != nil {
		return fmt.Errorf("events: write %s: %w", j.Path, err)
	}
	if st, err := f.Stat(); err == nil && st.Size() > j.limit() {
		return j.trim(f)
	}
	return nil
}

// openLocked opens the journal and locks it. A trim replaces the file, so
// a lock won on a file no longer at the path is given up and taken again
// on the one that is.
func (j *Journal) openLocked() (*os.File, error) {
	for {
		f, err := os.OpenFile(j.Path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("events: lock %s: %w", j.Path, err)
		}
		held, err1 := f.Stat()
		now, err2 := os.Stat(j.Path)
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			return f, nil
		}
		f.Close()
	}
}

// endsTorn says whether the file's last line was cut short (by a crash
// mid-write): the next event then starts on a line of its own.
func endsTorn(f *os.File) bool {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return false
	}
	b := make([]byte, 1)
	_, err = f.ReadAt(b, st.Size()-1)
	return err == nil && b[0] != '\n'
}

func (j *Journal) limit() int64 {
	if j.MaxBytes > 0 {
		return j.MaxBytes
	}
	return MaxBytes
}

func encode(ev Event) ([]byte, error) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ev.Time = ev.Time.UTC()
	line, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if len(line) > maxLine && len(ev.Error) > 512 {
		ev.Error = ev.Error[:512] + "…"
		if line, err = json.Marshal(ev); err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
	}
	return append(line, '\n'), nil
}

// trim keeps the newest half of the file, written to a new file that
// replaces it, so a reader sees the old journal or the new, never half.
// The caller holds the lock on f, which is the file at the path.
func (j *Journal) trim(f *os.File) error {
	if _, err := f.Seek(0, 0); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	keep := data[max(0, int64(len(data))-j.limit()/2):]
	if i := bytes.IndexByte(keep, '\n'); i >= 0 {
		keep = keep[i+1:]
	}
	if err := atomicfile.Write(j.Path, keep, 0o644); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	return nil
}

// Newest returns up to limit events, newest first, of infra (every one
// when infra is empty). A missing journal has none; a line that does not
// decode (a write cut short by a crash) is skipped.
func (j *Journal) Newest(infra string, limit int) ([]Event, error) {
	data, err := os.ReadFile(j.Path)
	if os.IsNotExist(err) {
		return []Event{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	var all []Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var ev Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Action != "" {
			all = append(all, ev)
		}
	}
	return Filter(all, infra, limit), nil
}

// Filter picks up to limit events of infra (all when empty) from a list
// oldest first, and returns them newest first.
func Filter(oldestFirst []Event, infra string, limit int) []Event {
	out := []Event{}
	for i := len(oldestFirst) - 1; i >= 0 && len(out) < limit; i-- {
		if infra == "" || oldestFirst[i].Infra == infra {
			out = append(out, oldestFirst[i])
		}
	}
	return out
}
