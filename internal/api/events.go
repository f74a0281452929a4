package api

import (
	"sync"

	"github.com/vnet-project/vnet/internal/events"
)

// Event is one entry of the event list: a change made through the server,
// or what an agent did (a failover, an LBT move, a limit split).
type Event = events.Event

// maxEvents is the most events one request returns.
const maxEvents = 500

// memoryEvents keeps events in memory, for backends without a journal.
type memoryEvents struct {
	mu   sync.Mutex
	list []Event
}

func (e *memoryEvents) Record(ev Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
	if len(e.list) > maxEvents {
		e.list = append(e.list[:0:0], e.list[len(e.list)-maxEvents:]...)
	}
	return nil
}

func (e *memoryEvents) Events(infra string, limit int) ([]Event, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return events.Filter(e.list, infra, limit), nil
}
