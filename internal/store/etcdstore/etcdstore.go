package etcdstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/vnet-project/vnet/internal/store"
)

// DefaultPrefix is where vnet's keys live in a shared etcd.
const DefaultPrefix = "/vnet/"

// DefaultTimeout bounds each call to etcd, dialing included. It is
// etcdctl's command timeout: long enough for the election that follows a
// leader's death on a busy host (one to two election timeouts, a second
// each by default, plus the vote's fsync), short enough that a lost quorum
// is reported while the user still waits for the answer.
const DefaultTimeout = 5 * time.Second

var (
	// ErrConflict means the infrastructure changed between the read and the
	// conditional write: another apply or destroy got there first.
	ErrConflict = errors.New("changed concurrently")
	// ErrUnavailable means etcd did not answer in time: no endpoint could be
	// reached, or the members reached have no leader (lost quorum).
	ErrUnavailable = errors.New("etcd unavailable")
)

// ConflictError says which infrastructure changed and how.
type ConflictError struct {
	Name     string
	Expected int64 // the revision the writer read; 0 for "did not exist"
	Found    int64 // the revision in etcd at write time; 0 for "does not exist"
}

func (e *ConflictError) Error() string {
	var what string
	switch {
	case e.Expected == 0:
		what = "was created by another apply"
	case e.Found == 0:
		what = "was destroyed meanwhile"
	default:
		what = fmt.Sprintf("was changed by another apply (revision %d, read at %d)", e.Found, e.Expected)
	}
	return fmt.Sprintf("infrastructure %q %s; nothing written, try again", e.Name, what)
}

// Is makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Options says how to reach etcd.
type Options struct {
	Endpoints []string      // "host:port" or "http(s)://host:port"
	Prefix    string        // DefaultPrefix when empty; must end in "/"
	Timeout   time.Duration // per call, DefaultTimeout when zero
	TLS       *tls.Config   // for https endpoints; the system's CAs when nil
}

// TLSFiles name PEM files for reaching etcd over https, as etcdctl's
// --cacert, --cert and --key do.
type TLSFiles struct {
	CA   string // the CA that signed etcd's certificate; the system's when empty
	Cert string // a client certificate, for an etcd that asks for one
	Key  string // its key
}

// Config loads the files; nil when none is named.
func (f TLSFiles) Config() (*tls.Config, error) {
	if f == (TLSFiles{}) {
		return nil, nil
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("etcd TLS: a client certificate needs its key, and a key its certificate")
	}
	c, err := transport.TLSInfo{CertFile: f.Cert, KeyFile: f.Key, TrustedCAFile: f.CA}.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd TLS: %w", err)
	}
	return c, nil
}

// Store is store.Store on etcd, with revision-checked writes and host reports.
type Store struct {
	cli     *clientv3.Client
	prefix  string
	timeout time.Duration
	where   string // the endpoints, for error messages
	ident   identity
	// eventCap is how many events to keep; MaxEvents when zero.
	eventCap int
	listed   listCache
}

var _ store.Store = (*Store)(nil)

// ParseEndpoints splits a comma-separated endpoint list (the --etcd flag,
// VNET_ETCD), dropping blanks.
func ParseEndpoints(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Open connects to etcd and checks, within the timeout, that it answers with
// a leader; a store that cannot be used fails here rather than on first use.
func Open(o Options) (*Store, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(o.Prefix, "/") {
		return nil, fmt.Errorf("etcd prefix %q: must end in /", o.Prefix)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	where := strings.Join(o.Endpoints, ",")
	for _, e := range o.Endpoints {
		if strings.HasPrefix(e, "https://") && o.TLS == nil {
			// As etcdctl does: the system's CAs, no client certificate.
			o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   o.Endpoints,
		DialTimeout: o.Timeout,
		// Pings let a lease keep-alive notice a dead connection instead of
		// waiting on TCP.
		DialKeepAliveTime:    o.Timeout,
		DialKeepAliveTimeout: o.Timeout,
		TLS:                  o.TLS,
		// A spec that does not compress is a value of several MiB (up to
		// MaxEncodedRecord with its encoding), above the client's default
		// of 2 MiB; the server has its own limit (--max-request-bytes).
		MaxCallSendMsgSize: 8 << 20,
		// The client's own retries log at warn on every attempt; the errors
		// this package returns say what went wrong once.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd at %s: %w", where, err)
	}
	s := &Store{cli: cli, prefix: o.Prefix, timeout: o.Timeout, where: where}
	err = s.call("connect", func(ctx context.Context) error {
		_, err := cli.Get(ctx, s.infraKey(""), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err
	})
	if err != nil {
		cli.Close()
		if cause := probe(o.Endpoints, o.TLS); cause != "" && errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w (%s)", err, cause)
		}
		return nil, err
	}
	return s, nil
}

// Close releases the connection. Reports under this store's leases stay
// until their TTL runs out (Reporter.Close removes them at once).
func (s *Store) Close() error { return s.cli.Close() }

// ctx bounds one call and asks etcd to refuse it at once when the member
// reached has no leader, instead of holding it until a leader returns.
func (s *Store) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(clientv3.WithRequireLeader(context.Background()), s.timeout)
}

// call runs fn under one timeout, and again while an election keeps the
// member reached from serving it: an election ends within a second or two,
// a lost quorum not before the timeout, which then says so. A call refused
// that way was not carried out, so repeating it is safe even for a
// conditional write.
func (s *Store) call(op string, fn func(context.Context) error) error {
	ctx, cancel := s.ctx()
	defer cancel()
	for {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if !refusedInElection(err) {
			return s.fail(op, err)
		}
		select {
		case <-ctx.Done():
			return s.fail(op, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func noLeader(err error) bool {
	return errors.Is(err, rpctypes.ErrNoLeader) || errors.Is(err, rpctypes.ErrGRPCNoLeader) ||
		strings.Contains(err.Error(), rpctypes.ErrNoLeader.Error())
}

// proposalDropped is raft's refusal of a write that a member took while
// it had no leader to forward it to, between the leader check that
// WithRequireLeader makes and the proposal. It reaches the client as a
// status of code Unknown with raft's own text, which no client sentinel
// matches, hence the text.
const proposalDropped = "raft proposal dropped"

// refusedInElection reports whether etcd refused a call, without carrying it
// out, because a leader election was under way: the member had no leader,
// the leader changed under a read, or raft dropped a write it could not
// forward.
func refusedInElection(err error) bool {
	return noLeader(err) ||
		errors.Is(err, rpctypes.ErrLeaderChanged) || errors.Is(err, rpctypes.ErrGRPCLeaderChanged) ||
		strings.Contains(err.Error(), rpctypes.ErrLeaderChanged.Error()) ||
		strings.Contains(err.Error(), proposalDropped)
}

// fail turns a client error into one that says which etcd and why.
func (s *Store) fail(op string, err error) error {
	reason, timedOut := s.unavailable(err)
	switch {
	case reason == "":
		return fmt.Errorf("%s: etcd at %s: %w", op, s.where, err)
	case timedOut:
		return fmt.Errorf("%s: %w at %s: %s after %s", op, ErrUnavailable, s.where, reason, s.timeout)
	default:
		return fmt.Errorf("%s: %w at %s: %s (%v)", op, ErrUnavailable, s.where, reason, err)
	}
}

// unavailable names why etcd did not serve a call ("" when it did answer,
// with an error of its own), and whether the call ran out of time.
func (s *Store) unavailable(err error) (reason string, timedOut bool) {
	code := status.Code(err)
	timedOut = ranOutOfTime(err)
	if noLeader(err) {
		return "no quorum (no leader)", true
	}
	// etcd's own deadline for committing a proposal passed first.
	if errors.Is(err, rpctypes.ErrTimeout) || errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) ||
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost) {
		return "no quorum (" + err.Error() + ")", true
	}
	if !timedOut && code != codes.Unavailable {
		return "", false
	}
	// A connection that is up but whose calls time out reaches a member
	// that cannot commit: quorum is lost. No connection at all is just that.
	if conn := s.cli.ActiveConnection(); conn != nil && conn.GetState() == connectivity.Ready && timedOut {
		return "no quorum (reachable, but no answer)", true
	}
	if timedOut {
		return "unreachable", true
	}
	// The connection broke under the call: whether a write took effect is
	// unknown, which the caller learns by reading again.
	return "connection lost", false
}

// ranOutOfTime reports whether a call failed because its deadline passed.
// The client says so in more than one way: the context's own error, a
// status with that code, or, when the deadline passes inside its retries,
// a status of code Unknown whose message is the context's error.
func ranOutOfTime(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	st := status.Convert(err)
	return st.Code() == codes.DeadlineExceeded ||
		st.Code() == codes.Unknown && strings.Contains(st.Message(), context.DeadlineExceeded.Error())
}

func (s *Store) infraKey(name string) string { return s.prefix + "infra/" + name }

// checkName keeps names from reaching into other keys.
func checkName(what, name string) error {
	if name == "" || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%s name %q: must be non-empty and contain no '/'", what, name)
	}
	return nil
}

// Get returns an infrastructure's record.
func (s *Store) Get(name string) (*store.Record, error) {
	r, _, err := s.GetRev(name)
	return r, err
}

// GetRev returns a record and its revision, to hand to PutIf or DeleteIf.
func (s *Store) GetRev(name string) (*store.Record, int64, error) {
	if err := checkName("infrastructure", name); err != nil {
		return nil, 0, err
	}
	var resp *clientv3.GetResponse
	err := s.call("get "+name, func(ctx context.Context) (err error) {
		resp, err = s.cli.Get(ctx, s.infraKey(name))
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, fmt.Errorf("%q: %w", name, store.ErrNotFound)
	}
	return recordOf(name, resp.Kvs[0]), resp.Kvs[0].ModRevision, nil
}

// tooLarge says a write was refused as too large, and so had no effect:
// by etcd, above its --max-request-bytes, or by gRPC on either side, above
// what the server takes in a message (that limit and 512 KiB) or what this
// client sends.
func tooLarge(err error) bool {
	return errors.Is(err, rpctypes.ErrRequestTooLarge) || errors.Is(err, rpctypes.ErrGRPCRequestTooLarge) ||
		strings.Contains(err.Error(), rpctypes.ErrRequestTooLarge.Error()) ||
		status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "larger than max")
}

// Put stores a record whatever is there; PutIf is the safe form for apply.
func (s *Store) Put(r *store.Record) error {
	v, err := encodeRecord(r)
	if err != nil {
		return err
	}
	err = s.call("put "+r.Name, func(ctx context.Context) error {
		_, err := s.cli.Put(ctx, s.infraKey(r.Name), v)
		return err
	})
	if err != nil && r.SpecEncoded != nil && tooLarge(err) {
		return s.Put(r.WithoutEncoding())
	}
	return err
}

// PutIf stores a record only if it still has revision expectRev (0: only if
// it does not exist), and returns the new revision. Otherwise it writes
// nothing and returns a *ConflictError. A record that etcd finds too large
// with its spec's encoding is stored without it.
func (s *Store) PutIf(r *store.Record, expectRev int64) (int64, error) {
	v, err := encodeRecord(r)
	if err != nil {
		return 0, err
	}
	resp, err := s.txnIf("put "+r.Name, s.infraKey(r.Name), expectRev, clientv3.OpPut(s.infraKey(r.Name), v))
	if err != nil && r.SpecEncoded != nil && tooLarge(err) {
		return s.PutIf(r.WithoutEncoding(), expectRev)
	}
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, conflict(r.Name, expectRev, resp)
	}
	return resp.Header.Revision, nil
}

// txnIf runs then if key still has revision rev, and otherwise reads the
// key's revision for the conflict error.
func (s *Store) txnIf(op, key string, rev int64, then clientv3.Op) (*clientv3.TxnResponse, error) {
	var resp *clientv3.TxnResponse
	err := s.call(op, func(ctx context.Context) (err error) {
		resp, err = s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(then).
			Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
			Commit()
		return err
	})
	return resp, err
}

func conflict(name string, expected int64, resp *clientv3.TxnResponse) error {
	ce := &ConflictError{Name: name, Expected: expected}
	if len(resp.Responses) == 1 {
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			ce.Found = kvs[0].ModRevision
		}
	}
	return ce
}

// Delete removes a record; removing a missing one is not an error.
func (s *Store) Delete(name string) error {
	if err := checkName("infrastructure", name); err != nil {
		return err
	}
	return s.call("delete "+name, func(ctx context.Context) error {
		_, err := s.cli.Delete(ctx, s.infraKey(name))
		return err
	})
}

// DeleteIf removes a record only if it still has revision expectRev, so a
// destroy cannot remove a spec applied after it looked.
func (s *Store) DeleteIf(name string, expectRev int64) error {
	_, err := s.DeleteIfRev(name, expectRev)
	return err
}

// DeleteIfRev is DeleteIf, and returns the etcd revision of the deletion
// (what WaitWithdrawn waits from).
func (s *Store) DeleteIfRev(name string, expectRev int64) (int64, error) {
	if err := checkName("infrastructure", name); err != nil {
		return 0, err
	}
	resp, err := s.txnIf("delete "+name, s.infraKey(name), expectRev, clientv3.OpDelete(s.infraKey(name)))
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, conflict(name, expectRev, resp)
	}
	return resp.Header.Revision, nil
}

// List returns every record, by name. A record whose value has not
// changed since the last List is not decoded again: the caller gets a
// copy of the record decoded then, whose Spec, SpecEncoded and Realized
// it shares with other callers and must not write into. A value that does
// not read as its infrastructure's record is listed as a damaged record
// (store.Damaged), so that it costs its own infrastructure alone.
func (s *Store) List() ([]*store.Record, error) {
	var resp *clientv3.GetResponse
	err := s.call("list", func(ctx context.Context) (err error) {
		resp, err = s.cli.Get(ctx, s.infraKey(""), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.listed.decode(s.infraKey(""), resp.Kvs), nil
}

// listCache keeps the records of the last List with the values they were
// decoded from: a host agent lists every record on each change of any,
// and decoding a large one costs milliseconds while comparing its value
// costs microseconds. The value, not its revision, decides, so that an
// etcd restored from a backup, whose revisions may repeat with other
// values, cannot serve a stale record.
type listCache struct {
	mu    sync.Mutex
	byKey map[string]listedRecord
}

type listedRecord struct {
	val []byte
	rec *store.Record
}

func (c *listCache) decode(prefix string, kvs []*mvccpb.KeyValue) []*store.Record {
	c.mu.Lock()
	last := c.byKey
	c.mu.Unlock()
	next := make(map[string]listedRecord, len(kvs))
	out := make([]*store.Record, 0, len(kvs))
	for _, kv := range kvs {
		l, ok := last[string(kv.Key)]
		if !ok || !bytes.Equal(l.val, kv.Value) {
			l = listedRecord{val: bytes.Clone(kv.Value), rec: recordOf(strings.TrimPrefix(string(kv.Key), prefix), kv)}
		}
		next[string(kv.Key)] = l
		r := *l.rec
		out = append(out, &r)
	}
	c.mu.Lock()
	c.byKey = next
	c.mu.Unlock()
	return out
}
