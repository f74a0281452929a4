package etcdstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/store"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrHostClaimed is wrapped by the error of an agent that would run for a
// host another live agent runs for: two agents of one host would each
// overwrite the other's reports, and undo each other's work.
var ErrHostClaimed = errors.New("another agent runs for this host")

// AgentID says which agent holds a host's claim, for people and for
// telling a dead holder on the same machine.
type AgentID struct {
	PID     int       `json:"pid"`
	Machine string    `json:"machine"` // the hostname of the machine it runs on
	Started time.Time `json:"started"`
	// BootID and Ticks (the process's start time in clock ticks since
	// boot) tell whether PID on this machine is still that process.
	BootID string `json:"boot_id,omitempty"`
	Ticks  uint64 `json:"start_ticks,omitempty"`
	// Claim is random, made with the claim: a claim that finds its own
	// key under a lease it lost (etcd restarted with it) takes it back.
	Claim string `json:"claim,omitempty"`
}

func (id AgentID) String() string {
	return fmt.Sprintf("pid %d on %s, started %s", id.PID, id.Machine, id.Started.Local().Format(time.DateTime))
}

// thisAgent is the identity of this process.
func thisAgent() AgentID {
	machine, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ticks, _ := startTicks(os.Getpid())
	return AgentID{PID: os.Getpid(), Machine: machine, Started: time.Now().UTC().Truncate(time.Second),
		BootID: strings.TrimSpace(string(boot)), Ticks: ticks, Claim: store.NewID()}
}

// startTicks is when process pid started, in clock ticks since boot
// (field 22 of /proc/PID/stat).
func startTicks(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("stat: no command")
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return 0, errors.New("stat: too short")
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// gone reports whether id is an agent of this machine whose process has
// ended: its claim is left from a kill, and need not be waited out.
func (id AgentID) gone(me AgentID) bool {
	if id.BootID == "" || id.BootID != me.BootID || id.Ticks == 0 {
		return false
	}
	ticks, err := startTicks(id.PID)
	return err != nil || ticks != id.Ticks
}

// HostClaim is a host's claim, held under a lease this agent keeps alive:
// the key says which agent runs for the host, and goes with the lease when
// the agent dies or is cut off from etcd for longer than the lease's TTL.
type HostClaim struct {
	s    *Store
	host string
	key  string
	id   AgentID
	ttl  int64

	mu       sync.Mutex
	lease    clientv3.LeaseID
	stop     func()
	lost     chan struct{}
	released bool
}

func (s *Store) claimKey(host string) string { return s.prefix + "agents/" + host }

// ClaimHost claims host for this process's agent. When another agent's
// claim is live it fails with ErrHostClaimed, naming that agent; a claim
// left by an agent of this machine that is no longer running is taken
// over at once, and one left elsewhere goes with its lease, within ttl.
func (s *Store) ClaimHost(host string, ttl time.Duration) (*HostClaim, error) {
	if err := checkName("host", host); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		ttl = DefaultReportTTL
	}
	c := &HostClaim{s: s, host: host, key: s.claimKey(host), id: thisAgent(), ttl: int64(math.Ceil(ttl.Seconds()))}
	if err := c.claim(); err != nil {
		return nil, err
	}
	return c, nil
}

// Lost is closed when the claim's lease is lost (etcd unreachable for
// longer than its TTL): the agent then claims the host again (Renew) or
// stops. A nil claim is never lost.
func (c *HostClaim) Lost() <-chan struct{} {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// Renew claims the host again after the claim was lost, as the same
// agent; it fails with ErrHostClaimed when another agent took it meanwhile.
func (c *HostClaim) Renew() error {
	c.mu.Lock()
	c.dropLease()
	c.mu.Unlock()
	return c.claim()
}

// Release gives the host up: the claim's key goes with its lease, at once.
// A nil claim holds nothing.
func (c *HostClaim) Release() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return nil
	}
	c.released = true
	lease := c.lease
	c.dropLease()
	if lease == 0 {
		return nil
	}
	return c.s.call("release the claim of host "+c.host, func(ctx context.Context) error {
		_, err := c.s.cli.Revoke(ctx, lease)
		return err
	})
}

// claim takes the key under a new lease, taking over a claim its holder,
// an agent of this machine, left when it died.
func (c *HostClaim) claim() error {
	v, err := json.Marshal(c.id)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		holder, rev, err := c.try(string(v))
		if err != nil || holder == nil {
			return err
		}
		if attempt > 0 || holder.Claim != c.id.Claim && !holder.gone(c.id) {
			return fmt.Errorf("host %s is claimed by the agent of %s: stop that one first, or give this one another --host: %w",
				c.host, holder, ErrHostClaimed)
		}
		// Its own, under a lease it lost, or left by an agent of this
		// machine that is no longer running.
		err = c.s.call("take over the claim of host "+c.host, func(ctx context.Context) error {
			_, err := c.s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(c.key), "=", rev)).
				Then(clientv3.OpDelete(c.key)).Commit()
			return err
		})
		if err != nil {
			return err
		}
	}
}

// try puts the claim under a new lease if no claim exists, and otherwise
// returns the holder and its revision.
func (c *HostClaim) try(v string) (*AgentID, int64, error) {
	var g *clientv3.LeaseGrantResponse
	err := c.s.call("lease for the claim of host "+c.host, func(ctx context.Context) (err error) {
		g, err = c.s.cli.Grant(ctx, c.ttl)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	var resp *clientv3.TxnResponse
	err = c.s.call("claim host "+c.host, func(ctx context.Context) (err error) {
		resp, err = c.s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", 0)).
			Then(clientv3.OpPut(c.key, v, clientv3.WithLease(g.ID))).
			Else(clientv3.OpGet(c.key)).Commit()
		return err
	})
	if err == nil && resp.Succeeded {
		return nil, 0, c.keep(g.ID)
	}
	c.revoke(g.ID)
	if err != nil {
		return nil, 0, err
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil, 0, fmt.Errorf("claim host %s: the claim went while read; try again", c.host)
	}
	var holder AgentID
	if err := json.Unmarshal(kvs[0].Value, &holder); err != nil {
		holder = AgentID{Machine: "an agent that wrote " + strconv.Quote(string(kvs[0].Value))}
	}
	return &holder, kvs[0].ModRevision, nil
}

// keep keeps lease id alive, and closes lost when it ends unasked.
func (c *HostClaim) keep(id clientv3.LeaseID) error {
	kctx, stop := context.WithCancel(context.Background())
	ch, err := c.s.cli.KeepAlive(kctx, id)
	if err != nil {
		stop()
		c.revoke(id)
		return c.s.fail("keep the claim of host "+c.host+" alive", err)
	}
	lost := make(chan struct{})
	c.mu.Lock()
	c.lease, c.stop, c.lost = id, stop, lost
	c.mu.Unlock()
	go func() {
		for range ch {
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.lease == id && !c.released {
			close(lost)
		}
	}()
	return nil
}

func (c *HostClaim) revoke(id clientv3.LeaseID) {
	_ = c.s.call("revoke a lease", func(ctx context.Context) error {
		_, err := c.s.cli.Revoke(ctx, id)
		return err
	})
}

// dropLease stops keeping the lease alive; the caller holds mu.
func (c *HostClaim) dropLease() {
	if c.stop != nil {
		c.stop()
	}
	c.lease, c.stop = 0, nil
}
