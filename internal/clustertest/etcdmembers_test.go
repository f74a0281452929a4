package clustertest

import "testing"

func TestLastLeaderTerm(t *testing.T) {
	for _, tc := range []struct {
		name, log string
		want      int
	}{
		{"none", "raft2026/11/28 04:30:00 INFO: 8e9e05c52164694d became candidate at term 2\n", 0},
		{"one", "raft2026/11/28 04:30:00 INFO: 8e9e05c52164694d became leader at term 2\n", 2},
		{"the last of several", "raft2026/11/28 04:30:00 INFO: a became leader at term 2\n" +
			"raft2026/11/28 04:30:00 INFO: a became follower at term 3\n" +
			"raft2026/11/28 04:30:00 INFO: a became leader at term 11\n", 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lastLeaderTerm(tc.log); got != tc.want {
				t.Errorf("lastLeaderTerm = %d, want %d", got, tc.want)
			}
		})
	}
}
