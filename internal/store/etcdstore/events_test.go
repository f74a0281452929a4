package etcdstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/events"
)

func TestEventsKeptInOrderAndBounded(t *testing.T) {
	srv := startEtcd(t)
	s := openStore(t, srv.Endpoint())
	s.eventCap = 5
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 8; i++ {
		// Two events at the same instant keep both.
		if err := s.AppendEvent(events.Event{Time: at.Add(time.Duration(i/2) * time.Second), Action: events.Apply, Infra: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Events()
	if err != nil {
		t.Fatal(err)
	}
	var infras string
	for _, ev := range got {
		infras += ev.Infra
	}
	if infras != "34567" {
		t.Errorf("kept events of %q, want the last five in order, 34567", infras)
	}
}
