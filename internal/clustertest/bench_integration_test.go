package clustertest

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"
)

// TestClusterPropagation measures, over VNET_CLUSTER_BENCH one-VM changes
// on three hosts, how long from `vnet apply --etcd` returning until vnet
// status shows every host current (polled every 10 ms, each poll a vnet
// status run). Skipped unless VNET_CLUSTER_BENCH is set.
func TestClusterPropagation(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("VNET_CLUSTER_BENCH"))
	if n <= 0 {
		t.Skip("set VNET_CLUSTER_BENCH=<changes> to measure propagation")
	}
	c := faultCluster(t, time.Duration(n)*3*time.Second+60*time.Second, "hv1", "hv2", "hv3")
	infra := c.Infra()
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs))
	waitConverged(t, c, infra, 1, 30*time.Second)
	var took []time.Duration
	for i := 0; i < n; i++ {
		// A new VM each time (the last one goes), on each host in turn.
		vm := fmt.Sprintf("  - {name: vm%d, host: hv%d, nics: [{portgroup: app, ip: 10.77.0.%d/24}]}\n", 10+i, 1+i%3, 10+i)
		p := c.WriteSpec(infra, c.Spec(infra, switchAndVMs+vm))
		if out, err := c.Vnet("apply", p); err != nil {
			t.Fatalf("apply %d: %v\n%s", i, err, out)
		}
		start := time.Now()
		for {
			st, err := status(t, c, infra)
			if err == nil && st.Generation == i+2 && st.Converged {
				break
			}
			if time.Since(start) > 20*time.Second {
				t.Fatalf("change %d not on every host within 20 s: %+v %v", i, st, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		took = append(took, time.Since(start))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	q := func(p float64) time.Duration { return took[int(p*float64(len(took)-1)+0.5)] }
	t.Logf("%d changes: min %s p50 %s p99 %s max %s", n, took[0].Round(time.Millisecond),
		q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}
