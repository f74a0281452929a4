package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/examples"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/service"
)

// TestNetperfRunOnTheKernel starts netperf runs through the API against a
// VM of the demo and reads their results: a stream and a request/response
// test, each with a positive rate (how large is this machine's business).
func TestNetperfRunOnTheKernel(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the network; runs without -short")
	}
	nstest.RequireRoot(t)
	bin := vnetBinary(t)
	infra := nstest.Infra("apinp")
	src, err := examples.FS.ReadFile("demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src = bytes.Replace(src, []byte("name: demo\n"), []byte("name: "+infra+"\n"), 1)
	be := &service.Local{StateDir: t.TempDir(), Exe: bin}
	base := serveOnTheKernel(t, be, Config{}, infra)
	c, _ := NewClient(base, testToken)
	if _, err := c.Apply(context.Background(), infra, "demo.yaml", src, false); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body string
		rate func(*NetperfRun) float64
	}{
		{`{"to": "web2", "test": "TCP_STREAM", "length": 2}`, func(r *NetperfRun) float64 { return r.Result.Throughput }},
		{`{"to": "db1", "vnic": "eth0", "from": "web1", "test": "TCP_RR", "length": 1}`, func(r *NetperfRun) float64 { return r.Result.TransRate }},
	} {
		run := netperfThroughAPI(t, base, infra, tc.body)
		if run.State != "done" || run.Result == nil || tc.rate(run) <= 0 {
			t.Errorf("%s: %+v", tc.body, run)
			continue
		}
		t.Logf("%s from %s to %s %s: %.1f Mbit/s, %.0f transactions/s", run.Test, run.From, run.To, run.Address,
			run.Result.Throughput/1e6, run.Result.TransRate)
	}
}

// netperfThroughAPI starts a run and polls it until it ends.
func netperfThroughAPI(t *testing.T, base, infra, body string) *NetperfRun {
	t.Helper()
	rq, _ := http.NewRequest("POST", base+"/api/v1/infras/"+infra+"/netperf", strings.NewReader(body))
	rq.Header.Set("Authorization", "Bearer "+testToken)
	rq.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	var run NetperfRun
	err = json.NewDecoder(resp.Body).Decode(&run)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("start %s: %d %v", body, resp.StatusCode, err)
	}
	loc := base + resp.Header.Get("Location")
	deadline := time.Now().Add(time.Duration(run.Length*float64(time.Second)) + 60*time.Second)
	for run.State == "running" {
		if time.Now().After(deadline) {
			t.Fatalf("run %s still running", run.ID)
		}
		time.Sleep(200 * time.Millisecond)
		resp, err := http.Get(loc)
		if err != nil {
			t.Fatal(err)
		}
		run = NetperfRun{}
		err = json.NewDecoder(resp.Body).Decode(&run)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatal(fmt.Errorf("GET %s: %d %v", loc, resp.StatusCode, err))
		}
	}
	return &run
}
