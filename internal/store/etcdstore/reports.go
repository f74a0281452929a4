package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vnet-project/vnet/internal/status"
)

// DefaultReportTTL is how long a host's report outlives its agent.
const DefaultReportTTL = 5 * time.Second

// Report is what one host's agent last realized of an infrastructure.
type Report struct {
	Host       string    `json:"host"`
	Generation int       `json:"generation"` // the record's generation the host realized
	Resources  int       `json:"resources"`  // objects vnet made on that host
	Errors     []string  `json:"errors,omitempty"`
	At         time.Time `json:"at"`
	// Removing says the host failed to remove its part of an
	// infrastructure that no longer places anything on it (destroyed, or
	// the host left out of its spec): Errors says why, Resources is what
	// its last apply recorded and Generation the last it realized (0 when
	// its agent does not know). The agent tries again at each pass and
	// withdraws the report once the removal succeeds; a removal that
	// succeeds at once leaves no report of this kind.
	Removing bool `json:"removing,omitempty"`
	// Security is what the firewall rules of the host's ports with port
	// security or an ACL counted, as CompactSecurity leaves it: only
	// non-zero counters, at most MaxReportedPorts ports.
	Security []status.PortSecurity `json:"security,omitempty"`
	// SecurityOmitted is how many more ports have a policy than Security
	// holds.
	SecurityOmitted int `json:"security_omitted,omitempty"`
	// Health is what the host's health checks found of the load
	// balancers' backends it runs; Conns what its client ports' load
	// balancers sent each backend.
	Health []status.BackendHealth `json:"health,omitempty"`
	Conns  []status.BackendConns  `json:"lb_conns,omitempty"`
}

// MaxReportedPorts bounds the ports a report carries counters of. A port
// costs about 150 bytes of JSON plus 20 per counter that counted
// something, so a full report stays well under 100 KiB: small next to
// etcd's request limit (1.5 MiB), and cheap to rewrite every few seconds
// while counters move, which each rewrite keeps in etcd's history until it
// compacts.
const MaxReportedPorts = 256

// CompactSecurity makes ports fit a report: counters that counted nothing
// are left out, and beyond max ports (MaxReportedPorts when max <= 0) those
// whose rules counted something are kept before those whose rules did not,
// by port; it returns the ports kept, by port, and how many were left out.
// ports is not changed.
func CompactSecurity(ports []status.PortSecurity, max int) ([]status.PortSecurity, int) {
	if max <= 0 {
		max = MaxReportedPorts
	}
	out := make([]status.PortSecurity, 0, len(ports))
	for _, p := range ports {
		var c map[string]uint64
		for label, n := range p.Counters {
			if n == 0 {
				continue
			}
			if c == nil {
				c = map[string]uint64{}
			}
			c[label] = n
		}
		p.Counters = c
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (len(out[i].Counters) > 0) != (len(out[j].Counters) > 0) {
			return len(out[i].Counters) > 0
		}
		return out[i].Port < out[j].Port
	})
	omitted := 0
	if len(out) > max {
		omitted, out = len(out)-max, out[:max]
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Port < out[j].Port })
	if len(out) == 0 {
		out = nil
	}
	return out, omitted
}

func (s *Store) reportPrefix(infra string) string { return s.prefix + "status/" + infra + "/" }

// Reports lists the live reports of an infrastructure's hosts, by host. A
// host whose agent died is absent once its lease's TTL has run out.
func (s *Store) Reports(infra string) ([]Report, error) {
	if err := checkName("infrastructure", infra); err != nil {
		return nil, err
	}
	var resp *clientv3.GetResponse
	err := s.call("reports of "+infra, func(ctx context.Context) (err error) {
		resp, err = s.cli.Get(ctx, s.reportPrefix(infra), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Report, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		r, err := decodeReport(kv.Key, kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Reported lists, by name, the infrastructures some host reports, whether
// or not their record is still there: a host whose removal of a destroyed
// infrastructure failed keeps reporting it.
func (s *Store) Reported() ([]string, error) {
	prefix := s.prefix + "status/"
	var resp *clientv3.GetResponse
	err := s.call("reported infrastructures", func(ctx context.Context) (err error) {
		resp, err = s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, kv := range resp.Kvs {
		infra, _, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
		if ok && (len(out) == 0 || out[len(out)-1] != infra) {
			out = append(out, infra)
		}
	}
	return out, nil
}

// Reporter publishes one host's report of one infrastructure under a lease
// it keeps alive. If the lease is lost (etcd unreachable for longer than the
// TTL, or the lease revoked), the reporter takes a new one and publishes its
// last report again by itself, retrying each second until it succeeds or is
// closed: a live agent reappears once etcd can be reached.
type Reporter struct {
	s    *Store
	key  string
	host string
	ttl  int64 // seconds, as etcd counts

	mu     sync.Mutex
	lease  clientv3.LeaseID // 0: none
	stop   func()           // ends lease's keep-alive
	last   string           // the last report, to publish again on a new lease
	closed bool
	done   chan struct{} // closed by Close
}

// ErrReporterClosed is returned by Report after Close.
var ErrReporterClosed = errors.New("reporter closed")

// Reporter returns a reporter for host's part of infra. ttl is rounded up to
// whole seconds; etcd may raise it to its minimum (about 2 s by default).
func (s *Store) Reporter(infra, host string, ttl time.Duration) (*Reporter, error) {
	if err := checkName("infrastructure", infra); err != nil {
		return nil, err
	}
	if err := checkName("host", host); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		ttl = DefaultReportTTL
	}
	secs := int64(math.Ceil(ttl.Seconds()))
	return &Reporter{s: s, key: s.reportPrefix(infra) + host, host: host, ttl: secs, done: make(chan struct{})}, nil
}

// Report publishes r (its Host is the reporter's, At is now if unset).
func (rp *Reporter) Report(r Report) error {
	r.Host = rp.host
	if r.At.IsZero() {
		r.At = time.Now().UTC()
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.closed {
		return fmt.Errorf("report %s: %w", rp.key, ErrReporterClosed)
	}
	rp.last = string(v)
	return rp.publish()
}

// publish puts the last report under a live lease; the caller holds mu.
func (rp *Reporter) publish() error {
	for attempt := 0; ; attempt++ {
		lease, err := rp.liveLease()
		if err != nil {
			return err
		}
		err = rp.s.call("report "+rp.key, func(ctx context.Context) error {
			_, err := rp.s.cli.Put(ctx, rp.key, rp.last, clientv3.WithLease(lease))
			return err
		})
		// The lease can expire between the keep-alive's last word and
		// this put; one fresh lease is worth a try.
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			rp.dropLease()
			continue
		}
		return err
	}
}

// liveLease returns the current lease, or takes a new one and keeps it
// alive; the caller holds mu.
func (rp *Reporter) liveLease() (clientv3.LeaseID, error) {
	if rp.lease != 0 {
		return rp.lease, nil
	}
	var g *clientv3.LeaseGrantResponse
	err := rp.s.call("lease for "+rp.key, func(ctx context.Context) (err error) {
		g, err = rp.s.cli.Grant(ctx, rp.ttl)
		return err
	})
	if err != nil {
		return 0, err
	}
	// The keep-alive lives with the lease, not with one call's deadline.
	kctx, stop := context.WithCancel(context.Background())
	ch, err := rp.s.cli.KeepAlive(kctx, g.ID)
	if err != nil {
		stop()
		return 0, rp.s.fail("keep lease for "+rp.key+" alive", err)
	}
	go func() {
		for range ch {
		}
		rp.renew(g.ID)
	}()
	rp.lease, rp.stop = g.ID, stop
	return g.ID, nil
}

// renew runs when the keep-alive of lease id ended. Unless that was on
// purpose (Close, or a newer lease already taken) or the store is closed, it
// publishes the last report on a new lease, once a second until that works.
func (rp *Reporter) renew(id clientv3.LeaseID) {
	for {
		rp.mu.Lock()
		if rp.closed || rp.s.cli.Ctx().Err() != nil || (rp.lease != 0 && rp.lease != id) {
			rp.mu.Unlock()
			return
		}
		if rp.lease == id {
			rp.dropLease()
		}
		id = 0
		var err error
		if rp.last != "" {
			err = rp.publish()
		}
		rp.mu.Unlock()
		if err == nil {
			return
		}
		select {
		case <-rp.done:
			return
		case <-time.After(time.Second):
		}
	}
}

func (rp *Reporter) dropLease() {
	if rp.stop != nil {
		rp.stop()
	}
	rp.lease, rp.stop = 0, nil
}

// Close revokes the lease, so the host's report disappears now rather than
// after the TTL: an agent that stops on purpose is gone at once. The
// reporter cannot be used again.
func (rp *Reporter) Close() error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.closed {
		return nil
	}
	rp.closed = true
	close(rp.done)
	if rp.lease == 0 {
		return nil
	}
	lease := rp.lease
	rp.dropLease()
	err := rp.s.call("revoke report "+rp.key, func(ctx context.Context) error {
		_, err := rp.s.cli.Revoke(ctx, lease)
		return err
	})
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return err
}
