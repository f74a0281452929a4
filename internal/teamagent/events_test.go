package teamagent

import (
	"testing"

	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/teaming"
)

func TestMoveKind(t *testing.T) {
	tests := []struct {
		name     string
		was, now teaming.Assignment
		wasDown  bool
		want     string
	}{
		{"uplink cut", teaming.Assignment{Uplink: "u1", Reason: teaming.Pinned}, teaming.Assignment{Uplink: "u2", Reason: teaming.FailedTo}, true, events.Failover},
		{"standby takes over", teaming.Assignment{Uplink: "u1", Reason: teaming.Ordered}, teaming.Assignment{Uplink: "u2", Reason: teaming.Ordered}, true, events.Failover},
		{"no uplink left", teaming.Assignment{Uplink: "u2", Reason: teaming.FailedTo}, teaming.Assignment{Reason: teaming.NoUplink}, true, events.Failover},
		{"back on its uplink", teaming.Assignment{Uplink: "u2", Reason: teaming.FailedTo}, teaming.Assignment{Uplink: "u1", Reason: teaming.Pinned}, false, events.Failback},
		{"LBT", teaming.Assignment{Uplink: "u1", Reason: teaming.Pinned}, teaming.Assignment{Uplink: "u2", Reason: teaming.Moved}, false, events.LBTMove},
	}
	for _, tc := range tests {
		if got := moveKind(tc.was, tc.now, tc.wasDown); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestEmitStampsTheAgentsEvents(t *testing.T) {
	var got []events.Event
	a := &Agent{Infra: "team", Event: func(ev events.Event) { got = append(got, ev) }}
	a.emit(events.Event{Action: events.LBTMove, Host: "esx1", Port: "vm1/eth0", From: "u1", To: "u2"})
	(&Agent{Infra: "x"}).emit(events.Event{Action: events.Failover}) // no sink: nothing, no panic
	if len(got) != 1 || got[0].Infra != "team" || got[0].Who != "agent" || !got[0].OK || got[0].Time.IsZero() {
		t.Errorf("emitted %+v", got)
	}
}
