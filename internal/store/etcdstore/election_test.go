package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// What etcd answers while an election is under way is refused, not
// carried out, and so repeated; anything else is not.
func TestRefusedInElection(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no leader", rpctypes.ErrNoLeader, true},
		{"no leader, on the wire", rpctypes.ErrGRPCNoLeader, true},
		{"leader changed under a read", rpctypes.ErrLeaderChanged, true},
		{"leader changed, on the wire", rpctypes.ErrGRPCLeaderChanged, true},
		{"raft dropped the write", status.Error(codes.Unknown, "raft proposal dropped"), true},
		{"wrapped", fmt.Errorf("txn: %w", rpctypes.ErrGRPCNoLeader), true},
		// The outcome of a write that timed out is unknown: never repeated.
		{"timed out after the leader failed", rpctypes.ErrTimeoutDueToLeaderFail, false},
		{"timed out", rpctypes.ErrTimeout, false},
		{"too large", rpctypes.ErrRequestTooLarge, false},
		{"deadline", context.DeadlineExceeded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := refusedInElection(tc.err); got != tc.want {
				t.Errorf("refusedInElection(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// A call refused during an election is made again until it is served,
// within the store's timeout; another error ends it at once.
func TestCallRepeatsWhatAnElectionRefused(t *testing.T) {
	s := &Store{timeout: 5 * time.Second, where: "test"}
	refusals := []error{rpctypes.ErrGRPCNoLeader, status.Error(codes.Unknown, "raft proposal dropped"), rpctypes.ErrGRPCLeaderChanged}
	calls := 0
	err := s.call("put x", func(context.Context) error {
		calls++
		if calls <= len(refusals) {
			return refusals[calls-1]
		}
		return nil
	})
	if err != nil || calls != len(refusals)+1 {
		t.Fatalf("call = %v after %d calls, want nil after %d", err, calls, len(refusals)+1)
	}

	calls = 0
	other := errors.New("etcdserver: mvcc: required revision has been compacted")
	err = s.call("put x", func(context.Context) error { calls++; return other })
	if !errors.Is(err, other) || calls != 1 {
		t.Fatalf("call = %v after %d calls, want %v after 1", err, calls, other)
	}
}
