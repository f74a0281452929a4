package etcdstore

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/etcdserver"
)

// testPKI writes a CA, a certificate for a server on 127.0.0.1 and a client
// certificate, all signed by that CA, as PEM files in dir.
func testPKI(t *testing.T, dir string) (ca, serverCert, serverKey, clientCert, clientKey string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vnet test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	writePEM := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	issue := func(name string, serial int64, usage []x509.ExtKeyUsage) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return writePEM(name+".pem", "CERTIFICATE", der), writePEM(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	ca = writePEM("ca.pem", "CERTIFICATE", caDER)
	// etcd's own gateway connects to the server with the server's
	// certificate, so it serves both ends.
	serverCert, serverKey = issue("server", 2, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
	clientCert, clientKey = issue("client", 3, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	return
}

// Over https with client certificates: the right files get in, a client
// without a certificate or trusting another CA does not, and says so in time.
func TestTLSWithClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, sc, sk, cc, ck := testPKI(t, dir)
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

	open := func(f TLSFiles, endpoint string) (*Store, error) {
		tc, err := f.Config()
		if err != nil {
			t.Fatal(err)
		}
		return Open(Options{Endpoints: []string{endpoint}, TLS: tc, Timeout: time.Second})
	}
	s, err := open(TLSFiles{CA: ca, Cert: cc, Key: ck}, ep)
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
		s, err := open(tc.files, tc.endpoint)
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
