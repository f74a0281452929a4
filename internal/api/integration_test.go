package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/examples"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/service"
)

// scrape reads /metrics and returns each series' value by its name and labels.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[name+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// serveOnTheKernel serves be, a back end on this machine, as cfg says,
// with the test's token; when the test ends it destroys infras and checks
// that nothing of them is left.
func serveOnTheKernel(t *testing.T, be *service.Local, cfg Config, infras ...string) (base string) {
	t.Helper()
	t.Cleanup(func() {
		for _, infra := range infras {
			if _, err := be.Destroy(context.Background(), infra, service.DestroyOptions{}); err != nil && !errors.Is(err, service.ErrNotFound) {
				t.Errorf("cleanup: %v", err)
			}
			nstest.AssertGone(t, infra)
		}
	})
	cfg.Backend, cfg.TokenFile = be, filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(cfg.TokenFile, []byte("ci:"+testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, s)
}

// TestServerOnTheKernel applies the demo through the API, scrapes the
// metrics while traffic crosses the distributed switch, reads windowed
// rates and the dashboard, and destroys it through the API.
func TestServerOnTheKernel(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the network; runs without -short")
	}
	nstest.RequireRoot(t)
	infra := fmt.Sprintf("api%d", os.Getpid()%100000)
	src, err := examples.FS.ReadFile("demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src = bytes.Replace(src, []byte("name: demo\n"), []byte("name: "+infra+"\n"), 1)
	be := &service.Local{StateDir: t.TempDir()}
	base := serveOnTheKernel(t, be, Config{SampleInterval: 200 * time.Millisecond}, infra)
	c, _ := NewClient(base, testToken)
	ctx := context.Background()

	dry, err := c.Apply(ctx, infra, "demo.yaml", src, true)
	if err != nil || dry.Changes == 0 || dry.Executed != 0 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	res, err := c.Apply(ctx, infra, "demo.yaml", src, false)
	if err != nil || res.Executed != dry.Changes {
		t.Fatalf("apply: %+v %v (the dry run planned %d)", res, err, dry.Changes)
	}
	if again, err := c.Apply(ctx, infra, "demo.yaml", src, false); err != nil || again.Changes != 0 {
		t.Fatalf("second apply: %+v %v", again, err)
	}
	st, err := c.Status(ctx, infra)
	if err != nil || len(st.VMs) != 3 || len(st.Drift) != 0 {
		t.Fatalf("status: %+v %v", st, err)
	}

	portTx := fmt.Sprintf("vnet_port_transmit_bytes_total{host=esx1,infra=%s,portgroup=pg-vm,vm=web1,vnic=eth0}", infra)
	poolTx := fmt.Sprintf("vnet_pool_transmit_bytes_total{host=esx1,infra=%s,pool=vm,switch=dvs0,uplink=dvUplink1}", infra)
	before := scrape(t, base)
	for _, want := range []string{portTx, poolTx, fmt.Sprintf("vnet_up{infra=%s}", infra),
		fmt.Sprintf("vnet_pool_limit_bits_per_second{host=esx1,infra=%s,pool=backup,switch=dvs0,uplink=dvUplink1}", infra),
		fmt.Sprintf("vnet_uplink_up{host=esx2,infra=%s,nic=vmnic0,switch=dvs0,uplink=dvUplink1}", infra)} {
		if _, ok := before[want]; !ok {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if before[fmt.Sprintf("vnet_up{infra=%s}", infra)] != 1 {
		t.Error("vnet_up is not 1")
	}

	// The server's stats need samples from before the traffic too.
	if _, err := statsOnceSampled(ctx, c, infra, time.Minute, nil); err != nil {
		t.Fatalf("stats before the traffic: %v", err)
	}

	// web1 (esx1) sends to web2 (esx2) over dvUplink1 in pool vm.
	ln := nstest.Listen(t, nstest.NSName(infra, "web2"), "192.168.50.12:5001")
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(io.Discard, conn)
			conn.Close()
		}
	}()
	conn, err := nstest.Dial(t, nstest.NSName(infra, "web1"), "192.168.50.12:5001", net.Dialer{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); {
		if _, err := conn.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	time.Sleep(500 * time.Millisecond) // a sample after the traffic
	after := scrape(t, base)
	const atLeast = 1 << 20
	if grew := after[portTx] - before[portTx]; grew < atLeast {
		t.Errorf("web1 eth0 sent %.0f bytes by its counter, want at least %d", grew, atLeast)
	}
	if grew := after[poolTx] - before[poolTx]; grew < atLeast {
		t.Errorf("pool vm on esx1 sent %.0f bytes by its counter, want at least %d", grew, atLeast)
	}

	// A frame from a forged source MAC, which the demo's port groups
	// reject by default: dropped, and counted in the status and metrics the
	// API serves.
	forgedTx := fmt.Sprintf("vnet_port_security_packets_total{counter=forged-mac,host=esx1,infra=%s,portgroup=pg-vm,vm=web1,vnic=eth0}", infra)
	sendForged(t, nstest.NSName(infra, "web1"))
	st, err = c.Status(ctx, infra)
	if err != nil {
		t.Fatal(err)
	}
	var forged uint64
	for _, p := range st.Security {
		if p.Port == "web1 eth0" {
			forged = p.Counters["forged-mac"]
		}
	}
	if forged == 0 {
		t.Errorf("status: web1 eth0 counted no forged frame: %+v", st.Security)
	}
	if got := scrape(t, base)[forgedTx]; got < 1 {
		t.Errorf("/metrics: %s = %v, want at least 1", forgedTx, got)
	}

	stats, err := statsOnceSampled(ctx, c, infra, time.Minute, web1Sent)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range stats.Ports {
		if p.VM == "web1" && p.VNIC == "eth0" && p.Tx <= 0 {
			t.Errorf("stats: web1 eth0 sent nothing over %.1f s", stats.Seconds)
		}
	}

	if hasChromium() {
		dom := browse(t, base+"/?infra="+infra, os.Getenv("VNET_DASHBOARD_SCREENSHOT"))
		for _, vm := range []string{"web1", "db1", "web2"} {
			if !strings.Contains(dom, `id="vm-`+vm+`"`) {
				t.Errorf("the dashboard lacks VM %s", vm)
			}
		}
		uplink := "uplink esx1/dvs0/dvUplink1"
		if c, ok := chartsIn(t, dom)[uplink]; !ok || c.time == "" {
			t.Errorf("the dashboard has no chart of %s with its newest values", uplink)
		}
	}

	gone, err := c.Destroy(ctx, infra)
	if err != nil || gone.Removed == 0 {
		t.Fatalf("destroy: %+v %v", gone, err)
	}
	nstest.AssertGone(t, infra)
	if _, err := c.Status(ctx, infra); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("status after destroy: %v", err)
	}
}

// sendForged sends, from eth0 of a namespace, one broadcast frame from a
// source MAC that is not the vNIC's.
func sendForged(t *testing.T, ns string) {
	t.Helper()
	if err := nstest.Do(t, ns, func() error {
		ifc, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		frame := make([]byte, 60)
		copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0x99, 0x99, 0x88, 0xb5}) // local experimental EtherType
		to := &unix.SockaddrLinklayer{Ifindex: ifc.Index, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
		return unix.Sendto(fd, frame, 0, to)
	}); err != nil {
		t.Fatalf("send a forged frame from %s: %v", ns, err)
	}
}

// statsOnceSampled asks for the stats until the sampler's window shows
// what done wants (any two samples when done is nil), a minute at most. On
// a busy machine a round of sampling takes long and the server stretches
// its interval (to 3 s in one CI run): the window may be short of samples
// (the server says so with a 503, telling the client to try again
// shortly), or hold none yet from after the traffic.
func statsOnceSampled(ctx context.Context, c *Client, infra string, window time.Duration, done func(*StatsResult) bool) (*StatsResult, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		stats, err := c.Stats(ctx, infra, window)
		switch {
		case err != nil && !errors.Is(err, service.ErrNoSamples), time.Now().After(deadline):
			return stats, err
		case err == nil && (done == nil || done(stats)):
			return stats, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// web1Sent says whether web1's eth0 sent anything in the stats' window.
func web1Sent(s *StatsResult) bool {
	for _, p := range s.Ports {
		if p.VM == "web1" && p.VNIC == "eth0" && p.Tx > 0 {
			return true
		}
	}
	return false
}
