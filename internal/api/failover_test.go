package api

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/teamagent"
)

// failoverLab teams two uplinks in failover order: everything rides u1
// until its cable is pulled.
const failoverLab = `name: INFRA
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 100Mbit}, {name: vmnic1, speed: 100Mbit}]
switches:
  - name: dvs0
    uplinks:
      - {name: u1, nics: {esx1: vmnic0}}
      - {name: u2, nics: {esx1: vmnic1}}
    teaming: {policy: failover, active: [u1, u2]}
    portgroups: [{name: pg-vm}]
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg-vm, ip: 10.12.0.1/24}]}
`

// TestFailoverEventOnTheAPI pulls an uplink's cable under the agent an
// apply started and finds the failover in the API's event list, again
// after the server is started anew, and on the dashboard; the agent's
// vnet_agent_up is 1 meanwhile.
func TestFailoverEventOnTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the network; runs without -short")
	}
	nstest.RequireRoot(t)
	infra := nstest.Infra("apifo")
	src := strings.ReplaceAll(failoverLab, "INFRA", infra)
	dir := t.TempDir()
	// With the vnet binary, an apply starts the infrastructure's agent
	// (vnet agent run) as vnet apply does; it writes its events to the
	// state directory's journal.
	be := &service.Local{StateDir: dir, Exe: vnetBinary(t)}
	doc, err := spec.Load("failover.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() { // destroy removes the log
			log, _ := os.ReadFile(teamagent.LogFile(dir, infra))
			t.Logf("agent log:\n%s", log)
		}
		if _, err := be.Destroy(context.Background(), infra, service.DestroyOptions{}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		nstest.AssertGone(t, infra)
		if pid, up := teamagent.Running(dir, infra); up {
			t.Errorf("agent %d still runs", pid)
		}
	})
	if _, err := be.Apply(context.Background(), service.Source{Doc: doc}, service.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, up := teamagent.Running(dir, infra); !up {
		t.Fatal("the apply started no agent")
	}
	time.Sleep(time.Second) // the agent's first look

	s, err := New(Config{Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	base := startServer(t, s)
	if m := scrape(t, base); m["vnet_agent_up{host=,infra="+infra+"}"] != 1 {
		t.Errorf("vnet_agent_up of %s is not 1", infra)
	}
	setLinkIn(t, nstest.NSName(infra, "esx1"), "vmnic0", false)
	ev := waitEvent(t, base, infra, events.Failover)
	if ev.Host != "esx1" || ev.Port != "vm1/eth0" || ev.From != "u1" || ev.To != "u2" || ev.Who != "agent" {
		t.Errorf("failover event %+v, want vm1/eth0 on esx1 from u1 to u2 by the agent", ev)
	}
	setLinkIn(t, nstest.NSName(infra, "esx1"), "vmnic0", true)
	waitEvent(t, base, infra, events.Failback)

	// A server started anew reads the same journal.
	s2, err := New(Config{Backend: &service.Local{StateDir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	base2 := startServer(t, s2)
	if got := eventsOf(t, base2, infra); len(got) < 2 || got[0].Action != events.Failback || got[1].Action != events.Failover {
		t.Errorf("events after a restart: %+v, want the failback and the failover, newest first", got)
	}
	if hasChromium() {
		dom := browse(t, base2+"/?infra="+infra, "")
		if !strings.Contains(dom, `data-action="failover"`) || !strings.Contains(dom, "vm1/eth0 u1 → u2") {
			t.Errorf("the dashboard's event list lacks the failover of vm1/eth0 from u1 to u2")
		}
	}
}

func setLinkIn(t *testing.T, ns, name string, up bool) {
	t.Helper()
	if err := nstest.Do(t, ns, func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		if up {
			return netlink.LinkSetUp(l)
		}
		return netlink.LinkSetDown(l)
	}); err != nil {
		t.Fatal(err)
	}
}

func eventsOf(t *testing.T, base, infra string) []Event {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/events?infra=" + infra)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var evs []Event
	if err := json.NewDecoder(resp.Body).Decode(&evs); err != nil || resp.StatusCode != 200 {
		t.Fatalf("events: %d %v", resp.StatusCode, err)
	}
	return evs
}

// waitEvent polls the event list for up to 10 s for the newest event to be
// of the action: the agent acts within a tick or two.
func waitEvent(t *testing.T, base, infra, action string) Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs := eventsOf(t, base, infra)
		if len(evs) > 0 && evs[0].Action == action {
			return evs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event 10 s on; events: %+v", action, evs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
