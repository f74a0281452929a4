package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// putClaim writes a claim of host as another agent would, under a lease of
// ttl seconds.
func putClaim(t *testing.T, s *Store, host string, id AgentID, ttl int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := s.cli.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := json.Marshal(id)
	if _, err := s.cli.Put(ctx, s.claimKey(host), string(v), clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
}

// A second agent for a host is refused, with the first one's identity,
// until the first gives the host up.
func TestSecondAgentOfAHostIsRefused(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	first, err := s.ClaimHost("hv1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ClaimHost("hv1", 5*time.Second)
	host, _ := os.Hostname()
	if !errors.Is(err, ErrHostClaimed) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), host) {
		t.Fatalf("second claim: %v; want ErrHostClaimed naming pid %d on %s", err, os.Getpid(), host)
	}
	other, err := s.ClaimHost("hv2", 5*time.Second)
	if err != nil {
		t.Fatalf("another host: %v", err)
	}
	defer other.Release()
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := s.ClaimHost("hv1", 5*time.Second)
	if err != nil {
		t.Fatalf("after the first gave it up: %v", err)
	}
	again.Release()
}

// A claim left by a killed agent of this machine is taken over at once; one
// of another machine's agent is refused until its lease runs out.
func TestClaimOfADeadAgent(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	me := thisAgent()
	dead := me
	dead.Ticks++ // this pid, but another process: the one that held it has ended
	putClaim(t, s, "hv1", dead, 60)
	c, err := s.ClaimHost("hv1", 5*time.Second)
	if err != nil {
		t.Fatalf("claim left by a dead agent of this machine: %v", err)
	}
	c.Release()

	elsewhere := AgentID{PID: 1, Machine: "other", Started: time.Now(), BootID: "another-boot", Ticks: 5}
	putClaim(t, s, "hv1", elsewhere, 2)
	if _, err := s.ClaimHost("hv1", 5*time.Second); !errors.Is(err, ErrHostClaimed) || !strings.Contains(err.Error(), "pid 1 on other") {
		t.Fatalf("claim of another machine's agent: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := s.ClaimHost("hv1", 5*time.Second)
		if err == nil {
			c.Release()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other machine's claim outlived its lease: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A claim whose lease is lost says so; the agent claims the host again,
// unless another took it meanwhile.
func TestLostClaimIsRenewed(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	c, err := s.ClaimHost("hv1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	revokeBehindItsBack := func() {
		t.Helper()
		c.mu.Lock()
		lease := c.lease
		c.mu.Unlock()
		if _, err := s.cli.Revoke(context.Background(), lease); err != nil {
			t.Fatal(err)
		}
		select {
		case <-c.Lost():
		case <-time.After(10 * time.Second):
			t.Fatal("the lost lease went unnoticed")
		}
	}
	revokeBehindItsBack()
	if err := c.Renew(); err != nil {
		t.Fatalf("renew: %v", err)
	}
	// Its own claim under a lease it no longer keeps (an etcd that came
	// back with the lease) is its own to take back.
	revokeBehindItsBack()
	putClaim(t, s, "hv1", c.id, 60)
	if err := c.Renew(); err != nil {
		t.Fatalf("renew over its own claim: %v", err)
	}
	revokeBehindItsBack()
	putClaim(t, s, "hv1", AgentID{PID: 1, Machine: "other", BootID: "another-boot", Ticks: 5}, 60)
	if err := c.Renew(); !errors.Is(err, ErrHostClaimed) {
		t.Fatalf("renew after another took the host: %v", err)
	}
}
