// Package api is vnet's HTTP face over the service layer: infrastructures to apply,
// plan and destroy, their status and counters, Prometheus metrics, an
// OpenAPI document of all of it, and a dashboard. See docs/api.md.
package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
)

// DefaultAddr is where the server listens unless told otherwise: this
// machine only.
const DefaultAddr = "127.0.0.1:8470"

// Defaults of the limits and the sampler.
const (
	// DefaultMaxBody is the largest spec the spec loader reads, so that
	// whatever `vnet apply FILE` takes, a PUT takes too.
	DefaultMaxBody        = spec.MaxSpecBytes
	DefaultSampleInterval = time.Second
	DefaultHistory        = 15 * time.Minute
	// A slow or hostile client must send its headers within
	// DefaultHeaderTimeout and its whole request within
	// DefaultRequestTimeout; an idle connection is closed after
	// DefaultIdleTimeout.
	DefaultHeaderTimeout  = 5 * time.Second
	DefaultRequestTimeout = 30 * time.Second
	DefaultIdleTimeout    = time.Minute
	// maxKernelReaders is how many requests may read the kernel at once;
	// the rest wait their turn rather than crowd the host.
	maxKernelReaders = 4
)

// Config is how the server runs.
type Config struct {
	Addr string
	// Version is vnet's, which /metrics says (vnet_build_info).
	Version string
	// Backend answers every request: this machine's (service.Local) or a
	// cluster's (service.Cluster).
	Backend   service.Backend
	TokenFile string // without one the server takes no changes
	// AuthReads asks for a token on reads too; without it reads are open
	// to clients on this machine (and need a token from anywhere else).
	AuthReads bool
	// Hosts are names the server answers to beside localhost, the
	// machine's name and addresses: a request whose Host is another name
	// is refused (see checkHost).
	Hosts           []string
	TLSCert, TLSKey string
	MaxBody         int64 // the largest PUT body; DefaultMaxBody when zero
	SampleInterval  time.Duration
	History         time.Duration // how far back /stats and /series reach
	// HeaderTimeout, RequestTimeout and IdleTimeout bound what a client may
	// hold a connection for; zero means the Default of each.
	HeaderTimeout, RequestTimeout, IdleTimeout time.Duration
	// Log receives one line per change asked for (who, what, the result)
	// and the server's own messages.
	Log io.Writer
	// Trace, when set, receives where each change's time goes in the
	// handler, around the service's own laps (VNET_TRACE).
	Trace io.Writer
}

// Server is the HTTP API over one backend.
type Server struct {
	cfg      Config
	be       service.Backend
	tokens   *Tokens
	sampler  *metrics.Sampler
	registry *prometheus.Registry
	applies  *prometheus.HistogramVec
	kernel   chan struct{}
	budgets  *budgets
	hosts    hosts
	refused  *refusals
	log      *log.Logger
	handler  http.Handler
	routes   []route
	runs     *service.NetperfRuns
	// runsCtx bounds netperf runs: Serve ends them when it shuts down.
	runsCtx  context.Context
	stopRuns context.CancelFunc
}

// New builds a server; Run serves it.
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("api: no backend")
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.SampleInterval <= 0 {
		cfg.SampleInterval = DefaultSampleInterval
	}
	if cfg.History <= 0 {
		cfg.History = DefaultHistory
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = DefaultHeaderTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("api: --tls-cert and --tls-key go together")
	}
	s := &Server{cfg: cfg, be: cfg.Backend, kernel: make(chan struct{}, maxKernelReaders),
		budgets: newBudgets(cfg.MaxBody, cfg.RequestTimeout), hosts: allowedHosts(cfg.Addr, cfg.Hosts),
		log: log.New(cfg.Log, "", log.LstdFlags)}
	s.refused = newRefusals(s.log)
	if cfg.TokenFile != "" {
		t, err := LoadTokens(cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		s.tokens = t
	}
	s.sampler = s.be.Sample(cfg.SampleInterval, cfg.History)
	s.sampler.Logf = s.log.Printf
	s.registry = prometheus.NewRegistry()
	s.applies = metrics.NewApplyHistogram()
	s.registry.MustRegister(s.applies)
	if s.be.ReadsKernel() {
		s.registry.MustRegister(&metrics.Collector{Infras: s.be.Specs, Open: s.be.Counting})
	}
	s.registry.MustRegister(agentCollector{s.be}, infraCollector{s.be})
	metrics.RegisterIdentity(s.registry, cfg.Version)
	s.runs = &service.NetperfRuns{Backend: s.be, Recorded: func(ev service.Event, err error) {
		s.log.Printf("event %s %s: %v", ev.Action, ev.Infra, err)
	}}
	s.runsCtx, s.stopRuns = context.WithCancel(context.Background())
	s.routes = s.routeTable()
	s.handler = s.buildHandler()
	return s, nil
}

// Handler is the server's HTTP handler, for tests and for embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// Sampler is the sampler behind /stats and /series; Run starts it.
func (s *Server) Sampler() *metrics.Sampler { return s.sampler }

// Run serves until ctx ends, then shuts down, giving requests in flight a
// few seconds to finish.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.cfg.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve is Run on a listener of the caller's.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := s.httpServer()
	if s.cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(s.cfg.TLSCert, s.cfg.TLSKey)
		if err != nil {
			ln.Close()
			return fmt.Errorf("tls: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.sampler.Run(ctx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	scheme := "http"
	if s.cfg.TLSCert != "" {
		scheme = "https"
	}
	s.log.Printf("serving the vnet API at %s://%s", scheme, ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.stopRuns()
	defer s.refused.close()
	shut, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	if err := srv.Shutdown(shut); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// httpServer bounds what a slow or hostile client can hold: its headers
// and its whole request must come in time, and an idle connection is
// closed. An answer may take as long as an apply does.
func (s *Server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.HeaderTimeout,
		ReadTimeout:       s.cfg.RequestTimeout,
		WriteTimeout:      10 * time.Minute,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          log.New(connectionErrors{s.refused}, "", 0),
	}
}

// Run serves the API with cfg until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// metricsHandler serves Prometheus's exposition of the registry.
func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, ErrorLog: s.log})
}
