package crashtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
)

// tapSpec is one host whose port group has a VM of vnet's own and a guest
// on a TAP (attach: {tap:}), shaped, as a hypervisor's guest on one
// machine: its apply moves the TAP into the host's namespace, its destroy
// moves it back.
const tapSpec = `name: tap
hosts:
  - {name: hv1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: vmnic0}}]
    portgroups:
      - {name: pg-web, subnet: 10.44.0.0/24, shaping: {ingress: {average: 200Mbit, burst: 256KiB}}}
vms:
  - {name: web1, host: hv1, nics: [{portgroup: pg-web, ip: 10.44.0.1/24}]}
  - {name: guest1, host: hv1, nics: [{portgroup: pg-web, mac: "52:54:00:44:00:09", attach: {tap: TAP}}]}
`

// tapRig is an infrastructure whose guest's TAP is made in a machine
// namespace of its own, where vnet runs (through nsenter) as it would on
// the hypervisor: the TAP is in vnet's own namespace.
type tapRig struct {
	infra, state, machine, tap string
	file, without              string // the spec, and the spec without the guest
	wrap                       []string
	before                     tapSeen
}

func newTapRig(t *testing.T, prefix, tap string) *tapRig {
	t.Helper()
	r := &tapRig{infra: uniqueInfra(prefix), state: t.TempDir(), tap: tap}
	r.machine = nstest.Machine(t, r.infra)
	r.wrap = []string{"nsenter", "--net=/run/netns/" + r.machine}
	src := strings.Replace(tapSpec, "TAP", tap, 1)
	r.file = specFile(t, src, r.infra)
	r.without = specFile(t, src[:strings.Index(src, "  - {name: guest1")], r.infra)
	nstest.AddTap(t, r.machine, tap)
	r.before = r.seen(t)
	if r.before.where != r.machine {
		t.Fatalf("the TAP is not where it was made: %+v", r.before)
	}
	t.Cleanup(func() {
		r.vnet(t, nil, "destroy", r.infra)
		if left := leftovers(t, r.infra, r.state); len(left) > 0 {
			t.Errorf("left after cleanup: %v", left)
		}
	})
	return r
}

func (r *tapRig) vnet(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return vnetBy(t, r.wrap, r.state, env, args...)
}

func (r *tapRig) must(t *testing.T, args ...string) string {
	t.Helper()
	res := r.vnet(t, nil, args...)
	if res.code != 0 || res.killed {
		t.Fatalf("vnet %s: exit %d:\n%s", strings.Join(args, " "), res.code, res.out)
	}
	return res.out
}

func (r *tapRig) killed(t *testing.T, n int, args ...string) result {
	t.Helper()
	res := r.vnet(t, []string{fmt.Sprintf("VNET_KILL_AT=%d", n)}, args...)
	if !res.killed {
		t.Fatalf("vnet %s was not killed at point %d (exit %d):\n%s", strings.Join(args, " "), n, res.code, res.out)
	}
	return res
}

func (r *tapRig) points(t *testing.T, args ...string) []string {
	t.Helper()
	trace := filepath.Join(t.TempDir(), "trace")
	if res := r.vnet(t, []string{"VNET_KILL_TRACE=" + trace}, args...); res.code != 0 {
		t.Fatalf("vnet %v: exit %d:\n%s", args, res.code, res.out)
	}
	return traceLines(trace)
}

// tapSeen is where the TAP is and what it is there.
type tapSeen struct {
	where        string // its namespace, "" when it is in neither
	master       string
	alias        string
	mtu          int
	up           bool
	root         string // its root qdisc's kind
	hardwareAddr string
}

// seen finds the TAP in the machine or in the host's namespace: a TAP
// found in neither is lost.
func (r *tapRig) seen(t *testing.T) tapSeen {
	t.Helper()
	for _, ns := range []string{r.machine, plan.NSName(r.infra, "hv1")} {
		if _, err := os.Stat("/run/netns/" + ns); err != nil {
			continue
		}
		var s tapSeen
		nstest.InNS(t, ns, func(h *netlink.Handle) error {
			link, err := h.LinkByName(r.tap)
			if err != nil {
				return nil
			}
			a := link.Attrs()
			s = tapSeen{where: ns, alias: a.Alias, mtu: a.MTU, up: a.Flags&1 != 0, hardwareAddr: a.HardwareAddr.String()}
			if a.MasterIndex != 0 {
				if m, err := h.LinkByIndex(a.MasterIndex); err == nil {
					s.master = m.Attrs().Name
				}
			}
			qs, err := h.QdiscList(link)
			for _, q := range qs {
				if q.Attrs().Parent == netlink.HANDLE_ROOT {
					s.root = q.Type()
				}
			}
			return err
		})
		if s.where != "" {
			return s
		}
	}
	return tapSeen{}
}

// intact fails unless the TAP is in one of the two namespaces: a kill
// never loses it.
func (r *tapRig) intact(t *testing.T, after string) {
	t.Helper()
	if s := r.seen(t); s.where == "" {
		t.Fatalf("after %s the TAP %s is lost: in neither %s nor the host's namespace", after, r.tap, r.machine)
	}
}

// attached fails unless the TAP is the guest's switch port.
func (r *tapRig) attached(t *testing.T) {
	t.Helper()
	s := r.seen(t)
	if s.where != plan.NSName(r.infra, "hv1") || s.master != "dvs0" || !strings.HasPrefix(s.alias, plan.AliasPrefix) {
		t.Fatalf("the TAP is not the guest's port on dvs0: %+v", s)
	}
}

// givenBack fails unless the TAP is back where it was made, as it was,
// and no record of it is left.
func (r *tapRig) givenBack(t *testing.T) {
	t.Helper()
	if s := r.seen(t); s != r.before {
		t.Fatalf("the TAP is not given back as it was:\n got  %+v\n want %+v", s, r.before)
	}
	if recs := r.records(t); len(recs) > 0 {
		t.Fatalf("records of devices left: %v", recs)
	}
}

// records lists the state directory's records of devices.
func (r *tapRig) records(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(r.state, "devices"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, path)
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// converge proves the next apply repairs the host and a further one
// changes nothing, with the TAP the guest's port.
func (r *tapRig) converge(t *testing.T) {
	t.Helper()
	r.must(t, "apply", r.file)
	if out := r.must(t, "apply", "--dry-run", "--full", r.file); !strings.Contains(out, "no changes") {
		t.Errorf("after the repairing apply, a further one would change:\n%s", out)
	}
	r.attached(t)
}

// destroyClean proves a destroy leaves nothing of the infrastructure and
// gives the TAP back as it was.
func (r *tapRig) destroyClean(t *testing.T) {
	t.Helper()
	r.must(t, "destroy", r.infra)
	if left := leftovers(t, r.infra, r.state); len(left) > 0 {
		t.Errorf("destroy left: %v", left)
	}
	r.givenBack(t)
}

// Every kill point of the first apply and of the destroy of a guest on a
// TAP, on one machine: among them those between recording the TAP and
// moving it into the host's namespace, between the move and the record's
// update, and between moving it back and removing the record. After each
// kill the TAP is in one of the two namespaces (never lost); the next
// apply converges with the TAP as the guest's port, and the destroy after
// gives it back as it was made, with no record left.
func TestKillTapMoveAtEveryStep(t *testing.T) {
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED in -short: kills apply and destroy at every step")
	}
	rs := make([]*tapRig, workers())
	for i := range rs {
		rs[i] = newTapRig(t, fmt.Sprintf("crt%d", i), "tapk0")
	}
	r0 := rs[0]
	start := time.Now()
	applyPoints := r0.points(t, "apply", r0.file)
	r0.attached(t)
	destroyPoints := r0.points(t, "destroy", r0.infra)
	r0.givenBack(t)
	for _, want := range []struct {
		points []string
		text   string
	}{
		{applyPoints, "TAP tapk0 recorded, not yet moved into"},
		{applyPoints, "TAP tapk0 moved into"},
		{destroyPoints, "TAP tapk0 moved back, its record not yet removed"},
	} {
		if !nstest.Contains(want.points, want.text) {
			t.Fatalf("no kill point %q among:\n%s", want.text, strings.Join(want.points, "\n"))
		}
	}
	defer func() {
		t.Logf("apply has %d kill points, destroy %d; killed at each, %d infrastructures at once, in %s",
			len(applyPoints), len(destroyPoints), len(rs), time.Since(start).Round(time.Second))
	}()
	var failed bool
	done := make(chan bool, len(rs))
	for w, r := range rs {
		go func() {
			ok := true
			for n := w + 1; n <= max(len(applyPoints), len(destroyPoints)) && ok; n += len(rs) {
				ok = t.Run(fmt.Sprintf("kill@%d", n), func(t *testing.T) {
					if n <= len(applyPoints) {
						t.Logf("apply killed after %q", applyPoints[n-1])
						r.killed(t, n, "apply", r.file)
						r.intact(t, "the killed apply")
						r.converge(t)
					} else {
						r.must(t, "apply", r.file)
					}
					if n <= len(destroyPoints) {
						t.Logf("destroy killed after point %d (once %q)", n, destroyPoints[n-1])
						r.killed(t, n, "destroy", r.infra)
						r.intact(t, "the killed destroy")
						r.converge(t)
					}
					r.destroyClean(t)
				})
			}
			done <- ok
		}()
	}
	for range rs {
		failed = !<-done || failed
	}
	if failed {
		t.Log("stopped at the first failure")
		return
	}
	// A destroy right after an apply or a destroy killed at a point that
	// concerns the TAP, with no apply between, gives the TAP back as it
	// was.
	for _, c := range []struct {
		what   string
		points []string
		args   []string
	}{{"apply", applyPoints, []string{"apply", r0.file}}, {"destroy", destroyPoints, []string{"destroy", r0.infra}}} {
		for n, p := range c.points {
			if !strings.Contains(p, "tapk0") {
				continue
			}
			if !t.Run(fmt.Sprintf("destroy-after-%s-killed@%d", c.what, n+1), func(t *testing.T) {
				if c.what == "destroy" {
					r0.must(t, "apply", r0.file)
				}
				t.Logf("%s killed after %q", c.what, p)
				r0.killed(t, n+1, c.args...)
				r0.intact(t, "the killed "+c.what)
				r0.destroyClean(t)
			}) {
				return
			}
		}
	}
}

// A guest's TAP that its hypervisor deleted (as libvirt does when the
// domain stops) leaves no record once its VM goes from the spec; one whose
// VM the spec still has is found by gc, which removes it, and dry lists
// it only.
func TestTapRecordGoesWithItsVM(t *testing.T) {
	nstest.RequireRoot(t)
	r := newTapRig(t, "crr", "tapr0")
	host := plan.NSName(r.infra, "hv1")
	record := filepath.Join(r.state, "devices", "netns-"+host, "tapr0.json")
	deleteTap := func() {
		nstest.InNS(t, host, func(h *netlink.Handle) error {
			link, err := h.LinkByName("tapr0")
			if err != nil {
				return err
			}
			return h.LinkDel(link)
		})
	}

	r.must(t, "apply", r.file)
	r.attached(t)
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("no record of the TAP moved in: %v", err)
	}
	deleteTap()
	r.must(t, "apply", r.without)
	if recs := r.records(t); len(recs) > 0 {
		t.Errorf("the guest went with its TAP gone, and records are left: %v", recs)
	}

	nstest.AddTap(t, r.machine, "tapr0")
	r.must(t, "apply", r.file)
	r.attached(t)
	deleteTap()
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("no record of the TAP moved in: %v", err)
	}
	out := gcBy(t, r.wrap, r.state, []string{r.infra}, "--dry-run")
	if !strings.Contains(out, "would remove record of device tapr0 in namespace "+host) {
		t.Errorf("gc --dry-run does not list the record:\n%s", out)
	}
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("gc --dry-run removed the record: %v", err)
	}
	out = gcBy(t, r.wrap, r.state, []string{r.infra})
	if !strings.Contains(out, "removed record of device tapr0") {
		t.Errorf("gc does not say it removed the record:\n%s", out)
	}
	if recs := r.records(t); len(recs) > 0 {
		t.Errorf("gc left records: %v", recs)
	}
	if out := gcBy(t, r.wrap, r.state, []string{r.infra}); strings.Contains(out, "record of device") {
		t.Errorf("a second gc:\n%s", out)
	}
	r.must(t, "apply", r.without)
	r.must(t, "destroy", r.infra)
	if left := leftovers(t, r.infra, r.state); len(left) > 0 {
		t.Errorf("destroy left: %v", left)
	}
}
