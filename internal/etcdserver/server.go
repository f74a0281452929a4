// Package etcdserver runs a single-member etcd inside the vnet process, for
// setups small enough not to have an etcd cluster of their own (`vnet
// server`) and for tests. It is etcd itself (go.etcd.io/etcd/server/v3/embed),
// so a user who outgrows it points vnet at a real cluster and nothing else
// changes.
package etcdserver

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults for `vnet server`.
const (
	DefaultDataDir   = "/var/lib/vnet/etcd"
	DefaultClientURL = "http://127.0.0.1:2379"
	DefaultPeerURL   = "http://127.0.0.1:2380"
)

// MaxRequestBytes is the largest request the member takes (etcd's
// --max-request-bytes, 1.5 MiB by default). An infrastructure is one value,
// compressed when large: a spec of 10,000 virtual networks with its
// encoding is 0.33 MB, but a spec that does not compress, at the spec's
// limit of 4 MiB (spec.MaxSpecBytes), is a value of 4 MiB and more. Every
// stored version of a value counts against the database's quota (2 GiB)
// until compaction drops it.
const MaxRequestBytes = 8 << 20

// Config says where the member keeps its data and listens.
type Config struct {
	Name    string // member name, "vnet" when empty
	DataDir string
	// ClientURL is where agents and commands connect: "host:port" or
	// "http://host:port". Port 0 picks a free port.
	ClientURL string
	// AdvertiseURL is the client URL given to others; ClientURL when empty.
	// Needed when ClientURL listens on every address (0.0.0.0).
	AdvertiseURL string
	// PeerURL is raft's listener, unused by a single member but required;
	// keep it on loopback. Port 0 picks a free port.
	PeerURL string
	// LogLevel of etcd's own log on stderr: debug, info, warn, error.
	// Shutting down is quiet at any level.
	LogLevel string
	// StartTimeout bounds how long Start waits for the member to serve.
	StartTimeout time.Duration
	// NoFsync trades durability for speed; for tests only.
	NoFsync bool
	// CertFile and KeyFile make the client URL https; with ClientCAFile
	// too, only clients with a certificate that CA signed get in.
	CertFile, KeyFile, ClientCAFile string
}

// TLS says whether clients must use https.
func (c Config) TLS() bool { return c.CertFile != "" || c.KeyFile != "" }

// Server is a running member.
type Server struct {
	etcd     *embed.Etcd
	endpoint string
	peer     string
	closing  *atomic.Bool
}

// Start runs the member and returns once it serves clients.
func Start(c Config) (*Server, error) {
	if c.Name == "" {
		c.Name = "vnet"
	}
	if c.DataDir == "" {
		return nil, errors.New("etcd server: no data dir")
	}
	if c.LogLevel == "" {
		c.LogLevel = "warn"
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = time.Minute
	}
	if c.TLS() && (c.CertFile == "" || c.KeyFile == "") {
		return nil, errors.New("etcd server: TLS needs both a certificate and its key")
	}
	if c.ClientCAFile != "" && !c.TLS() {
		return nil, errors.New("etcd server: a client CA needs TLS (a certificate and its key)")
	}
	client, err := listenURL("client", c.ClientURL, DefaultClientURL)
	if err != nil {
		return nil, err
	}
	if client.Scheme == "https" && !c.TLS() {
		return nil, fmt.Errorf("etcd server: %s needs a certificate and its key", client)
	}
	if c.TLS() {
		client.Scheme = "https"
	}
	peer, err := listenURL("peer", c.PeerURL, DefaultPeerURL)
	if err != nil {
		return nil, err
	}
	if peer.Scheme != "http" {
		return nil, fmt.Errorf("etcd server: peer URL %s: a single member's peer port is plain http on loopback", peer)
	}
	advertise := client
	if c.AdvertiseURL != "" {
		if advertise, err = parseURL("advertise", c.AdvertiseURL); err != nil {
			return nil, err
		}
		if c.TLS() {
			advertise.Scheme = "https"
		}
	}
	if ip := net.ParseIP(advertise.Hostname()); ip != nil && ip.IsUnspecified() {
		return nil, fmt.Errorf("etcd server: listening on %s, so give the address agents should use (advertise URL)", client.Host)
	}

	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = c.DataDir
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*advertise}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(c.Name)
	level, err := zapcore.ParseLevel(c.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("etcd server log level: %w", err)
	}
	closing := new(atomic.Bool)
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(quietOnClose{
		Core:    zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(os.Stderr), level),
		closing: closing,
	}))
	cfg.UnsafeNoFsync = c.NoFsync
	cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = c.CertFile, c.KeyFile
	if c.ClientCAFile != "" {
		cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = c.ClientCAFile, true
	}
	// Reports are rewritten as agents come and go; keep an hour of history
	// so the database does not grow without bound.
	cfg.MaxRequestBytes = MaxRequestBytes
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = "1h"

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd server in %s: %w", c.DataDir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("etcd server in %s: %w", c.DataDir, err)
	case <-time.After(c.StartTimeout):
		closing.Store(true)
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("etcd server in %s: not ready after %s", c.DataDir, c.StartTimeout)
	}
	return &Server{etcd: e, endpoint: advertise.String(), peer: peer.String(), closing: closing}, nil
}

// Endpoint is the client URL to give agents and commands (--etcd).
func (s *Server) Endpoint() string { return s.endpoint }

// PeerURL is where the member listens for raft peers.
func (s *Server) PeerURL() string { return s.peer }

// Err delivers an error should the member fail while serving.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the member, finishing requests in flight.
func (s *Server) Close() {
	s.closing.Store(true)
	s.etcd.Close()
}

// Kill stops the member at once without a graceful shutdown, as a crash
// would; for tests of clients that must survive it.
func (s *Server) Kill() {
	s.closing.Store(true)
	s.etcd.Server.HardStop()
	s.etcd.Close()
}

func parseURL(what, s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("etcd server %s URL %q: %w", what, s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("etcd server %s URL %q: want http or https", what, s)
	}
	if u.Port() == "" {
		return nil, fmt.Errorf("etcd server %s URL %q: no port", what, s)
	}
	return u, nil
}

// listenURL parses a listen URL and turns port 0 into a free port, since
// etcd must know its real port to advertise it.
func listenURL(what, s, def string) (*url.URL, error) {
	if s == "" {
		s = def
	}
	u, err := parseURL(what, s)
	if err != nil {
		return nil, err
	}
	if u.Port() != "0" {
		return u, nil
	}
	l, err := net.Listen("tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("etcd server %s URL %q: %w", what, s, err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
	return u, nil
}

// quietOnClose drops what etcd logs for each listener it closes on shutdown
// (a stop asked for is not a failure worth a stack trace), and two warnings
// about choices a single vnet member makes on purpose: one port for gRPC and
// HTTP, and no authentication (hence unsigned tokens).
type quietOnClose struct {
	zapcore.Core
	closing *atomic.Bool
}

func (q quietOnClose) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	m := e.Message
	if strings.HasPrefix(m, "Running http and grpc server on single port") || strings.HasPrefix(m, "simple token is not cryptographically signed") {
		return ce
	}
	if q.closing.Load() && (strings.HasPrefix(m, "setting up serving from embedded etcd failed") || strings.Contains(m, "grpc server due to error")) {
		return ce
	}
	return q.Core.Check(e, ce)
}

func (q quietOnClose) With(f []zapcore.Field) zapcore.Core {
	return quietOnClose{Core: q.Core.With(f), closing: q.closing}
}
