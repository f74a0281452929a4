package etcdstore

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/etcdserver"
	"github.com/vnet-project/vnet/internal/etcdserver/etcdtest"
)

// Over https with client certificates: the right files get in, a client
// without a certificate or trusting another CA does not, and says so in time.
func TestTLSWithClientCertificates(t *testing.T) {
	dir := t.TempDir()
	p := etcdtest.WritePKI(t, dir)
	ca, sc, sk, cc, ck := p.CA, p.ServerCert, p.ServerKey, p.ClientCert, p.ClientKey
	srv, err := etcdserver.Start(etcdserver.Config{
		DataDir: filepath.Join(dir, "etcd"), ClientURL: "127.0.0.1:0", PeerURL: "127.0.0.1:0",
		CertFile: sc, KeyFile: sk, ClientCAFile: ca, LogLevel: "error", NoFsync: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ep := srv.Endpoint()
	if !strings.HasPrefix(ep, "https://") {
		t.Fatalf("endpoint %s, want https", ep)
	}

	open := func(f TLSFiles, endpoint string, timeout time.Duration) (*Store, error) {
		tc, err := f.Config()
		if err != nil {
			t.Fatal(err)
		}
		return Open(Options{Endpoints: []string{endpoint}, TLS: tc, Timeout: timeout})
	}
	// The good connection gets a timeout a loaded machine's TLS handshake
	// fits in; the refused ones keep 1 s, since they must fail fast anyway.
	s, err := open(TLSFiles{CA: ca, Cert: cc, Key: ck}, ep, 15*time.Second)
	if err != nil {
		t.Fatalf("with the CA and a client certificate: %v", err)
	}
	defer s.Close()
	if err := s.Put(record("demo", 1)); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Get("demo"); err != nil || r.Generation != 1 {
		t.Fatalf("Get over TLS = %v, %v", r, err)
	}

	for _, tc := range []struct {
		name     string
		files    TLSFiles
		endpoint string
		cause    string
	}{
		{"no client certificate", TLSFiles{CA: ca}, ep, "certificate required"},
		{"the system's CAs", TLSFiles{Cert: cc, Key: ck}, ep, "unknown authority"},
		{"plain http", TLSFiles{}, "http://" + strings.TrimPrefix(ep, "https://"), ""},
	} {
		start := time.Now()
		s, err := open(tc.files, tc.endpoint, time.Second)
		if err == nil {
			s.Close()
			t.Errorf("%s: connected", tc.name)
			continue
		}
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.cause) {
			t.Errorf("%s: %v, want ErrUnavailable saying %q", tc.name, err, tc.cause)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: took %s with a 1 s timeout", tc.name, took)
		}
		t.Logf("%s: %v", tc.name, err)
	}

	if _, err := (TLSFiles{Cert: cc}).Config(); err == nil {
		t.Error("a certificate without its key accepted")
	}
	if _, err := (TLSFiles{CA: filepath.Join(dir, "missing.pem")}).Config(); err == nil {
		t.Error("a missing CA file accepted")
	}
	if c, err := (TLSFiles{}).Config(); c != nil || err != nil {
		t.Errorf("no files = %v, %v; want nil, nil", c, err)
	}
}
