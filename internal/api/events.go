package api

import (
	"sync"
	"time"
)

// Event is a change made through the server.
type Event struct {
	Time    time.Time `json:"time"`
	Who     string    `json:"who"`    // the token's name
	Remote  string    `json:"remote"` // the client's address
	Action  string    `json:"action"` // apply or destroy
	Infra   string    `json:"infra"`
	OK      bool      `json:"ok"`
	Changes int       `json:"changes"` // actions executed
	Seconds float64   `json:"seconds"`
	Error   string    `json:"error,omitempty"`
}

// maxEvents is how many events the server remembers.
const maxEvents = 500

// events keeps the latest changes, oldest first, in memory: a restarted
// server starts with none.
type events struct {
	mu   sync.Mutex
	list []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
	if len(e.list) > maxEvents {
		e.list = append(e.list[:0:0], e.list[len(e.list)-maxEvents:]...)
	}
}

// since returns the events, newest first, of the infra (all when empty).
func (e *events) newest(infra string, limit int) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := []Event{}
	for i := len(e.list) - 1; i >= 0 && len(out) < limit; i-- {
		if infra == "" || e.list[i].Infra == infra {
			out = append(out, e.list[i])
		}
	}
	return out
}
