package service

import (
	"context"

	"github.com/vnet-project/vnet/internal/events"
)

// Record adds an event to the state directory's journal, which the
// infrastructures' teaming agents write to as well.
func (l *Local) Record(ev Event) error { return events.In(l.StateDir).Append(ev) }

// Events reads the state directory's journal, newest first.
func (l *Local) Events(_ context.Context, infra string, limit int) ([]Event, error) {
	return events.In(l.StateDir).Newest(infra, limit)
}

// Record keeps an event in etcd.
func (c *Cluster) Record(ev Event) error {
	st, err := c.store()
	if err != nil {
		return err
	}
	return st.AppendEvent(ev)
}

// Events reads the events kept in etcd, newest first.
func (c *Cluster) Events(_ context.Context, infra string, limit int) ([]Event, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	all, err := st.Events()
	if err != nil {
		return nil, err
	}
	return events.Filter(all, infra, limit), nil
}
