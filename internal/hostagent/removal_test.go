package hostagent

import (
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/store/etcdstore"
	"github.com/vnet-project/vnet/internal/store/etcdstore/etcdtest"
)

// reportingCluster holds its records in memory and its reports in etcd.
type reportingCluster struct {
	*memoryCluster
	st *etcdstore.Store
}

func (c reportingCluster) Reporter(infra, host string, ttl time.Duration) (*etcdstore.Reporter, error) {
	return c.st.Reporter(infra, host, ttl)
}

// A host whose removal of an infrastructure fails keeps reporting it, with
// the error, and tries again at its next pass; once the removal succeeds
// the report goes. The same holds for a host left out of the spec.
func TestFailedRemovalIsReportedUntilItSucceeds(t *testing.T) {
	st := etcdtest.Store(t)
	mc, dp := &memoryCluster{}, newMemoryDP()
	a := newMemoryAgent(t, mc, dp, t.TempDir(), nil)
	a.Cluster = reportingCluster{mc, st}
	defer a.closeReporters()
	var log strings.Builder
	a.Log = &log

	reports := func(t *testing.T) []etcdstore.Report {
		t.Helper()
		rs, err := st.Reports("inc")
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	removalFailed := func(t *testing.T, when string) etcdstore.Report {
		t.Helper()
		rs := reports(t)
		if len(rs) != 1 || !rs[0].Removing || len(rs[0].Errors) != 1 || !strings.Contains(rs[0].Errors[0], "device or resource busy") ||
			rs[0].Generation != 1 || rs[0].Resources == 0 {
			t.Fatalf("%s: reports %+v, want hv1's failed removal of generation 1\nlog:\n%s", when, rs, log.String())
		}
		if views := etcdstore.Assess(0, nil, rs); views[0].State != etcdstore.HostFailed {
			t.Errorf("%s: hv1 is %s, want failed", when, views[0].State)
		}
		if !a.recorded("inc") {
			t.Errorf("%s: the local record is gone while objects stand", when)
		}
		return rs[0]
	}

	for _, tc := range []struct {
		name   string
		remove func()
	}{
		{"destroyed", func() { mc.remove("inc") }},
		{"host left out of the spec", func() { mc.put("inc", "name: inc\nhosts:\n  - {name: hv2, underlay: 192.0.2.2}\n") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc.remove("inc")
			mc.put("inc", scaleSpec("inc", 3, 1))
			a.reconcile(true)
			if rs := reports(t); len(rs) != 1 || rs[0].Removing || len(rs[0].Errors) != 0 || rs[0].Generation != 1 {
				t.Fatalf("after the apply: %+v\nlog:\n%s", rs, log.String())
			}
			objects := len(dp.objs)

			tc.remove()
			dp.failDeletes = 1
			a.reconcile(false)
			first := removalFailed(t, "after a failed removal")
			if len(dp.objs) == 0 || len(dp.objs) >= objects {
				t.Errorf("%d of %d objects left, want some", len(dp.objs), objects)
			}

			// The next pass, for a change or on the interval, tries
			// again; a failure that persists keeps the report.
			dp.failDeletes = 1
			time.Sleep(10 * time.Millisecond)
			a.reconcile(true)
			if again := removalFailed(t, "after a second failure"); !again.At.After(first.At) {
				t.Errorf("the second failure was not reported (at %s, first at %s)", again.At, first.At)
			}

			a.reconcile(false)
			if rs := reports(t); len(rs) != 0 {
				t.Fatalf("after the removal succeeded: %+v\nlog:\n%s", rs, log.String())
			}
			if len(dp.objs) != 0 || a.recorded("inc") {
				t.Errorf("after the removal: %d objects, record kept %v", len(dp.objs), a.recorded("inc"))
			}
		})
	}
}
