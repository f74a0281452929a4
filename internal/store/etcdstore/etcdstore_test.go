package etcdstore

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/etcdserver"
	"github.com/vnet-project/vnet/internal/store"
)

// startEtcd runs a single-member etcd on loopback ports chosen at random,
// stopped when the test ends.
func startEtcd(t testing.TB) *etcdserver.Server {
	t.Helper()
	srv, err := etcdserver.Start(etcdserver.Config{
		DataDir:   t.TempDir(),
		ClientURL: "http://127.0.0.1:0",
		PeerURL:   "http://127.0.0.1:0",
		LogLevel:  "error",
		NoFsync:   true,
	})
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func openStore(t testing.TB, endpoints ...string) *Store {
	t.Helper()
	s, err := Open(Options{Endpoints: endpoints, Prefix: "/test-" + strings.ReplaceAll(t.Name(), "/", "-") + "/"})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func record(name string, gen int) *store.Record {
	return &store.Record{Name: name, SpecFile: name + ".yaml", Spec: []byte("name: " + name + "\n"), Generation: gen,
		AppliedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func TestGetPutDeleteList(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())

	if _, err := s.Get("demo"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a missing infra: %v, want ErrNotFound", err)
	}
	if recs, err := s.List(); err != nil || len(recs) != 0 {
		t.Fatalf("List of an empty store = %v, %v", recs, err)
	}
	for _, n := range []string{"web", "demo"} {
		if err := s.Put(record(n, 1)); err != nil {
			t.Fatalf("Put %s: %v", n, err)
		}
	}
	got, err := s.Get("demo")
	if err != nil {
		t.Fatal(err)
	}
	if want := record("demo", 1); got.Name != want.Name || string(got.Spec) != string(want.Spec) || !got.AppliedAt.Equal(want.AppliedAt) {
		t.Errorf("Get = %+v, want %+v", got, want)
	}
	recs, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Name != "demo" || recs[1].Name != "web" {
		t.Errorf("List = %v, want demo and web in order", recs)
	}
	if err := s.Delete("demo"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("demo"); err != nil {
		t.Errorf("second Delete: %v, want nil", err)
	}
	if _, err := s.Get("demo"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", "a/b"} {
		if err := s.Put(record(bad, 1)); err == nil {
			t.Errorf("Put of name %q: no error", bad)
		}
	}
}

// Two stores under different prefixes share one etcd without seeing each other.
func TestPrefixesIsolate(t *testing.T) {
	ep := startEtcd(t).Endpoint()
	a, err := Open(Options{Endpoints: []string{ep}, Prefix: "/a/"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(Options{Endpoints: []string{ep}, Prefix: "/b/"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.Put(record("demo", 1)); err != nil {
		t.Fatal(err)
	}
	if recs, err := b.List(); err != nil || len(recs) != 0 {
		t.Errorf("other prefix lists %v, %v", recs, err)
	}
	if _, err := Open(Options{Endpoints: []string{ep}, Prefix: "/no-slash"}); err == nil {
		t.Error("prefix without trailing slash accepted")
	}
}

func TestPutIfSequence(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())

	rev1, err := s.PutIf(record("demo", 1), 0)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	_, err = s.PutIf(record("demo", 1), 0)
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) || ce.Found != rev1 {
		t.Fatalf("second create: %v, want a conflict found at %d", err, rev1)
	}
	if !strings.Contains(err.Error(), `"demo"`) {
		t.Errorf("conflict error does not name the infrastructure: %v", err)
	}
	_, rev, err := s.GetRev("demo")
	if err != nil || rev != rev1 {
		t.Fatalf("GetRev = %d, %v; want %d", rev, err, rev1)
	}
	rev2, err := s.PutIf(record("demo", 2), rev1)
	if err != nil || rev2 <= rev1 {
		t.Fatalf("update at the read revision: %d, %v", rev2, err)
	}
	if _, err := s.PutIf(record("demo", 3), rev1); !errors.Is(err, ErrConflict) {
		t.Fatalf("update at a stale revision: %v, want ErrConflict", err)
	}
	if err := s.DeleteIf("demo", rev1); !errors.Is(err, ErrConflict) {
		t.Fatalf("delete at a stale revision: %v, want ErrConflict", err)
	}
	if err := s.DeleteIf("demo", rev2); err != nil {
		t.Fatalf("delete at the read revision: %v", err)
	}
	if _, err := s.PutIf(record("demo", 3), rev2); !errors.As(err, &ce) || ce.Found != 0 {
		t.Fatalf("update of a destroyed record: %v, want a conflict found at 0", err)
	}
	if got, err := s.Get("demo"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after the conflicts: %v, %v; want nothing stored", got, err)
	}
}

// Two applies read the same revision and write at once: exactly one wins,
// the other gets ErrConflict, and the stored record is the winner's whole.
func TestPutIfRace(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	if err := s.Put(record("demo", 0)); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 20; round++ {
		_, rev, err := s.GetRev("demo")
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			errs  = make([]error, 2)
		)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := record("demo", round)
				r.SpecFile = fmt.Sprintf("writer-%d.yaml", i)
				<-start
				_, errs[i] = s.PutIf(r, rev)
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: both writers won", round)
				}
				winner = i
			case !errors.Is(err, ErrConflict):
				t.Fatalf("round %d: writer %d: %v, want ErrConflict", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won: %v", round, errs)
		}
		got, err := s.Get("demo")
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("writer-%d.yaml", winner); got.SpecFile != want || got.Generation != round {
			t.Fatalf("round %d: stored %s generation %d, want %s generation %d", round, got.SpecFile, got.Generation, want, round)
		}
	}
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func hosts(t *testing.T, s *Store, infra string) string {
	t.Helper()
	reps, err := s.Reports(infra)
	if err != nil {
		t.Fatal(err)
	}
	var hs []string
	for _, r := range reps {
		hs = append(hs, fmt.Sprintf("%s@%d", r.Host, r.Generation))
	}
	return strings.Join(hs, ",")
}

func TestReportsRevokedOnClose(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	rp, err := s.Reporter("demo", "hv1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Report(Report{Generation: 1, Resources: 4}); err != nil {
		t.Fatal(err)
	}
	if err := rp.Report(Report{Generation: 2, Resources: 5, Errors: []string{"veth: busy"}}); err != nil {
		t.Fatal(err)
	}
	reps, err := s.Reports("demo")
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].Host != "hv1" || reps[0].Generation != 2 || reps[0].Resources != 5 || len(reps[0].Errors) != 1 || reps[0].At.IsZero() {
		t.Fatalf("Reports = %+v, want hv1's second report", reps)
	}
	if got := hosts(t, s, "other"); got != "" {
		t.Errorf("reports of another infrastructure: %s", got)
	}
	if err := rp.Close(); err != nil {
		t.Fatal(err)
	}
	if got := hosts(t, s, "demo"); got != "" {
		t.Errorf("after Close: %s, want no report", got)
	}
	if err := rp.Report(Report{Generation: 3}); !errors.Is(err, ErrReporterClosed) {
		t.Errorf("Report after Close: %v, want ErrReporterClosed", err)
	}
	if got := hosts(t, s, "demo"); got != "" {
		t.Errorf("after a report on a closed reporter: %q", got)
	}
	if err := rp.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// An agent that dies without a word (its connection just closes) keeps its
// report only until the lease's TTL runs out; one alive keeps it however
// long it lives.
func TestReportVanishesWhenAgentDies(t *testing.T) {
	ep := startEtcd(t).Endpoint()
	reader := openStore(t, ep)
	agentStore := func(host string) (*Store, *Reporter) {
		s, err := Open(Options{Endpoints: []string{ep}, Prefix: reader.prefix})
		if err != nil {
			t.Fatal(err)
		}
		rp, err := s.Reporter("demo", host, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := rp.Report(Report{Generation: 1}); err != nil {
			t.Fatal(err)
		}
		return s, rp
	}
	liveStore, live := agentStore("hv1")
	defer liveStore.Close()
	defer live.Close()
	deadStore, _ := agentStore("hv2")
	if got := hosts(t, reader, "demo"); got != "hv1@1,hv2@1" {
		t.Fatalf("reports = %q, want both hosts", got)
	}
	deadStore.Close() // the crash: no revoke, no more keep-alives

	// etcd's shortest lease is about 2 s here; give it generous room.
	waitFor(t, "hv2's report to expire", 20*time.Second, func() bool { return hosts(t, reader, "demo") == "hv1@1" })
	// hv2 expired after at least one TTL; hv1, kept alive, outlived it.
	views := Assess(1, []string{"hv1", "hv2"}, mustReports(t, reader, "demo"))
	if views[0].State != HostCurrent || views[1].State != HostGone {
		t.Errorf("Assess = %+v, want hv1 current, hv2 gone", views)
	}
}

func mustReports(t *testing.T, s *Store, infra string) []Report {
	t.Helper()
	r, err := s.Reports(infra)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A lease lost behind the reporter's back (expired while etcd was out of
// reach, or revoked) is replaced, and the last report published again,
// without the agent reporting anew.
func TestReporterRenewsLostLease(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	rp, err := s.Reporter("demo", "hv1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	if err := rp.Report(Report{Generation: 1, Resources: 3}); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		rp.mu.Lock()
		lease := rp.lease
		rp.mu.Unlock()
		ctx, cancel := s.ctx()
		_, err = s.cli.Revoke(ctx, lease)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("round %d: the report to come back", round), 15*time.Second, func() bool {
			return hosts(t, s, "demo") == "hv1@1"
		})
		rp.mu.Lock()
		renewed := rp.lease != 0 && rp.lease != lease
		rp.mu.Unlock()
		if !renewed {
			t.Fatalf("round %d: the report is back but not on a new lease", round)
		}
	}
	if err := rp.Report(Report{Generation: 2}); err != nil {
		t.Fatalf("report on the renewed lease: %v", err)
	}
	if got := hosts(t, s, "demo"); got != "hv1@2" {
		t.Errorf("after reporting again: %q", got)
	}
}

func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestUnreachableFailsFast(t *testing.T) {
	addr := closedPort(t)
	start := time.Now()
	_, err := Open(Options{Endpoints: []string{addr}, Timeout: time.Second})
	took := time.Since(start)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "unreachable") || !strings.Contains(err.Error(), addr) ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Open of a closed port: %v, want ErrUnavailable saying unreachable and naming %s", err, addr)
	}
	// The bound is the timeout plus slack for a loaded machine, far below
	// what a hang would take.
	if took > 10*time.Second {
		t.Errorf("Open took %s with a 1 s timeout", took)
	}
	t.Logf("%v (after %s)", err, took.Round(time.Millisecond))
}

// A store whose etcd dies fails each call within its timeout with a clear
// error, and works again when etcd is back on the same data.
func TestEtcdGoneThenBack(t *testing.T) {
	dir := t.TempDir()
	cfg := etcdserver.Config{DataDir: dir, ClientURL: "http://127.0.0.1:0", PeerURL: "http://127.0.0.1:0", LogLevel: "error", NoFsync: true}
	srv, err := etcdserver.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Endpoints: []string{srv.Endpoint()}, Timeout: time.Second})
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(record("demo", 1)); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"put", func() error { return s.Put(record("demo", 2)) }},
		{"get", func() error { _, err := s.Get("demo"); return err }},
		{"list", func() error { _, err := s.List(); return err }},
	} {
		start := time.Now()
		err := op.do()
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s with etcd down: %v, want ErrUnavailable", op.name, err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s took %s with a 1 s timeout", op.name, took)
		}
	}

	cfg.ClientURL, cfg.PeerURL = srv.Endpoint(), srv.PeerURL() // same ports, same data
	srv2, err := etcdserver.Start(cfg)
	if err != nil {
		t.Skipf("restart on %s (the port may have been taken meanwhile): %v", cfg.ClientURL, err)
	}
	defer srv2.Close()
	waitFor(t, "the store to reconnect", 20*time.Second, func() bool {
		r, err := s.Get("demo")
		return err == nil && r.Generation == 1
	})
}
