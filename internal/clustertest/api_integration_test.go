package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vnet-project/vnet/internal/nstest"
)

// getIn makes a GET from inside a namespace, where the address is.
func getIn(t *testing.T, ns, url string) (int, string) {
	t.Helper()
	tr := &http.Transport{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
		return nstest.Dial(t, ns, addr, net.Dialer{Timeout: 5 * time.Second})
	}, DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("GET %s in %s: %v", url, ns, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHostAgentMetricsAndTheAPIOverEtcd runs two machines' agents, one
// exporting its metrics, and vnet server's API over the cluster's etcd:
// the metrics are that host's part only, and the API's status says per
// host what the agents reported, a killed agent's host going dead.
func TestHostAgentMetricsAndTheAPIOverEtcd(t *testing.T) {
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("builds vnet and runs a cluster of machines")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("SKIPPED: needs nsenter (util-linux)")
	}
	c := New(t, sharedBin(t), "hv1", "hv2")
	hv1, hv2 := c.Machine("hv1"), c.Machine("hv2")
	hv1.StartAgent("--interval", "30s", "--metrics-addr", "127.0.0.1:9471")
	hv2.StartAgent("--interval", "30s", "--ttl", "2s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent of hv1:\n%s\nagent of hv2:\n%s", hv1.AgentLog(), hv2.AgentLog())
		}
	})
	// The API in the control namespace, over the cluster's etcd.
	api := c.command(c.Ctl, "server", "--no-etcd", "--etcd", c.Etcd, "--listen", "127.0.0.1:8470",
		"--state-dir", filepath.Join(c.dir, "api"))
	c.start(api)

	infra := c.Infra()
	body := `switches:
  - {name: dvs, hosts: [hv1, hv2], mtu: 1450, portgroups: [{name: app}]}
vms:
  - {name: vm1, host: hv1, nics: [{portgroup: app, ip: 10.78.0.1/24}]}
  - {name: vm2, host: hv2, nics: [{portgroup: app, ip: 10.78.0.2/24}]}
`
	if out, err := c.Vnet("apply", c.WriteSpec(infra, c.Spec(infra, body))); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	waitConverged(t, c, infra, 1, 30*time.Second)

	// hv1's metrics: vm1's vNIC, nothing of hv2's vm2.
	code, text := getIn(t, hv1.NS, "http://127.0.0.1:9471/metrics")
	if code != 200 {
		t.Fatalf("hv1 /metrics: %d %s", code, text)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse hv1's metrics: %v", err)
	}
	ports := map[string]bool{}
	for _, m := range fams["vnet_port_transmit_bytes_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "vm" {
				ports[l.GetValue()] = true
			}
		}
	}
	if !ports["vm1"] || ports["vm2"] {
		t.Errorf("hv1 exports the ports of %v, want vm1's alone", ports)
	}
	if up := fams["vnet_up"].GetMetric(); len(up) != 1 || up[0].GetGauge().GetValue() != 1 {
		t.Errorf("hv1's vnet_up: %v", up)
	}

	// The API's status, from the agents' reports.
	type apiStatus struct {
		VMs     []struct{ Name string } `json:"vms"`
		Cluster struct {
			Converged bool     `json:"converged"`
			Dead      []string `json:"dead_agents"`
			Hosts     []struct {
				Host, State string
			} `json:"hosts"`
		} `json:"cluster"`
	}
	read := func() (apiStatus, string) {
		code, body := getIn(t, c.Ctl, "http://127.0.0.1:8470/api/v1/infras/"+infra+"/status")
		var st apiStatus
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
			return st, fmt.Sprintf("%d %s", code, body)
		}
		return st, body
	}
	waitFor(t, 15*time.Second, "the API says converged", func() (bool, string) {
		st, body := read()
		return st.Cluster.Converged && len(st.VMs) == 2, body
	})
	hv2.KillAgent()
	waitFor(t, 15*time.Second, "the API names hv2's agent dead", func() (bool, string) {
		st, body := read()
		return strings.Join(st.Cluster.Dead, ",") == "hv2" && !st.Cluster.Converged, body
	})
	// Each agent's apply is an event in etcd, listed by the API.
	code, body = getIn(t, c.Ctl, "http://127.0.0.1:8470/api/v1/events?infra="+infra)
	var evs []struct{ Action, Host, Who string }
	if code != 200 || json.Unmarshal([]byte(body), &evs) != nil {
		t.Fatalf("events: %d %s", code, body)
	}
	applied := map[string]bool{}
	for _, ev := range evs {
		if ev.Action == "apply" && ev.Who == "agent" {
			applied[ev.Host] = true
		}
	}
	if !applied["hv1"] || !applied["hv2"] {
		t.Errorf("events lack an apply by each host's agent: %s", body)
	}
	if out, err := c.Vnet("destroy", infra); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
}
