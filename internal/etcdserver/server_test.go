package etcdserver

import (
	"net"
	"strings"
	"testing"
)

func TestBadConfigRefusedBeforeStarting(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no data dir", Config{}, "no data dir"},
		{"https without a certificate", Config{DataDir: dir, ClientURL: "https://127.0.0.1:0", PeerURL: "127.0.0.1:0"}, "needs a certificate"},
		{"a key without its certificate", Config{DataDir: dir, ClientURL: "127.0.0.1:0", KeyFile: "k.pem"}, "both a certificate and its key"},
		{"a client CA without TLS", Config{DataDir: dir, ClientURL: "127.0.0.1:0", ClientCAFile: "ca.pem"}, "needs TLS"},
		{"https peer", Config{DataDir: dir, ClientURL: "127.0.0.1:0", PeerURL: "https://127.0.0.1:0"}, "plain http"},
		{"ftp", Config{DataDir: dir, ClientURL: "ftp://127.0.0.1:0"}, "want http or https"},
		{"no port", Config{DataDir: dir, ClientURL: "http://127.0.0.1"}, "no port"},
		{"every address, nothing to advertise", Config{DataDir: dir, ClientURL: "0.0.0.0:0", PeerURL: "127.0.0.1:0"}, "advertise URL"},
		{"bad log level", Config{DataDir: dir, ClientURL: "127.0.0.1:0", PeerURL: "127.0.0.1:0", LogLevel: "loud"}, "log level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Start(tt.cfg)
			if err == nil {
				s.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestListenURL(t *testing.T) {
	u, err := listenURL("client", "127.0.0.1:0", DefaultClientURL)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() == "0" || u.Port() == "" {
		t.Errorf("port 0 became %s, want a real port", u)
	}
	u, err = listenURL("client", "", DefaultClientURL)
	if err != nil || u.String() != DefaultClientURL {
		t.Errorf("default = %v, %v", u, err)
	}
}

func TestStartServesAndReportsBusyPort(t *testing.T) {
	s, err := Start(Config{DataDir: t.TempDir(), ClientURL: "127.0.0.1:0", PeerURL: "127.0.0.1:0", LogLevel: "error", NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	host := strings.TrimPrefix(s.Endpoint(), "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatalf("endpoint %s: %v", s.Endpoint(), err)
	}
	c.Close()

	_, err = Start(Config{DataDir: t.TempDir(), ClientURL: s.Endpoint(), PeerURL: "127.0.0.1:0", LogLevel: "error", NoFsync: true})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("second member on the same port: %v, want address already in use", err)
	}
}
