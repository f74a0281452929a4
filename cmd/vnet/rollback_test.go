package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Over etcd (no kernel needed): vnet rollback over a VM a runtime attached
// on a port group the earlier generation lacks exits 2 naming it and its
// attachment, changing nothing; vnet diff says the same; --drop-attached
// takes it out; one on a port group that stays is kept.
func TestRollbackOverAttachedExit2(t *testing.T) {
	ep := startServer(t)
	dir := t.TempDir()
	const gen1 = `name: rbk
hosts:
  - {name: hv1, underlay: 192.0.2.1, nics: [{name: eth0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: eth0}}]
    portgroups: [{name: pg-vm}]
vms:
  - {name: vm1, host: hv1, nics: [{portgroup: pg-vm, ip: 10.20.0.1/24}]}
`
	gen2 := strings.Replace(gen1, "portgroups: [{name: pg-vm}]", "portgroups: [{name: pg-vm}, {name: pg-ctr}]", 1) +
		"  - {name: c-one, host: hv1, nics: [{portgroup: pg-ctr, ip: 10.20.1.9/24, attach: {netns: ctr1, ifname: eth0, container: one, cni: web}}]}\n" +
		"  - {name: c-two, host: hv1, nics: [{portgroup: pg-vm, ip: 10.20.0.9/24, attach: {netns: ctr2, ifname: eth0, container: two, cni: web}}]}\n"
	etcd := func(args ...string) (string, int) {
		t.Helper()
		return run(t, dir, append(args, "--etcd", ep)...)
	}
	for i, src := range []string{gen1, gen2} {
		f := filepath.Join(dir, "rbk.yaml")
		os.WriteFile(f, []byte(src), 0o644)
		if out, code := etcd("apply", f); code != 0 {
			t.Fatalf("apply %d: exit %d %s", i+1, code, out)
		}
	}
	out, code := etcd("rollback", "rbk", "--to", "1")
	if code != 2 || !strings.Contains(out, "VM c-one on hv1 (container one; eth0 in namespace ctr1 on pg-ctr, CNI network web): no port group pg-ctr") ||
		!strings.Contains(out, "--drop-attached") || strings.Contains(out, "c-two") {
		t.Errorf("rollback over c-one: exit %d\n%s", code, out)
	}
	if out, _ := etcd("history", "rbk"); strings.Contains(out, "rollback") {
		t.Errorf("the refused rollback kept an entry:\n%s", out)
	}
	out, code = etcd("diff", "rbk", "--to", "1")
	if code != 1 || !strings.Contains(out, "in the way: the apply or the rollback refuses") || !strings.Contains(out, "VM c-two on hv1 (container two)") ||
		!strings.Contains(out, "- vm c-one") || strings.Contains(out, "- vm c-two") {
		t.Errorf("diff to 1: exit %d\n%s", code, out)
	}
	out, code = etcd("rollback", "rbk", "--to", "1", "--drop-attached")
	if code != 0 || !strings.Contains(out, "taken out (--drop-attached), under their runtimes:\n  VM c-one") {
		t.Errorf("rollback --drop-attached: exit %d\n%s", code, out)
	}
	out, _ = etcd("get", "rbk")
	if strings.Contains(out, "c-one") || !strings.Contains(out, "c-two") || strings.Contains(out, "pg-ctr") {
		t.Errorf("after the rollback:\n%s", out)
	}
}

// Over etcd: vnet apply of the user's file keeps a VM a runtime attached;
// one of a file without the port group it is on exits 2 naming it,
// changing nothing; vnet diff of that file says the same;
// --drop-attached takes it out.
func TestApplyOverAttachedExit2(t *testing.T) {
	ep := startServer(t)
	dir := t.TempDir()
	const user = `name: apk
hosts:
  - {name: hv1, underlay: 192.0.2.1, nics: [{name: eth0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: eth0}}]
    portgroups: [{name: pg-vm}, {name: pg-ctr}]
vms:
  - {name: vm1, host: hv1, nics: [{portgroup: pg-vm, ip: 10.20.0.1/24}]}
`
	attached := user + "  - {name: c-one, host: hv1, nics: [{portgroup: pg-ctr, ip: 10.20.1.9/24, attach: {netns: ctr1, ifname: eth0, container: one, cni: web}}]}\n"
	without := strings.Replace(user, "portgroups: [{name: pg-vm}, {name: pg-ctr}]", "portgroups: [{name: pg-vm}]", 1)
	etcd := func(args ...string) (string, int) {
		t.Helper()
		return run(t, dir, append(args, "--etcd", ep)...)
	}
	file := func(name, src string) string {
		f := filepath.Join(dir, name)
		os.WriteFile(f, []byte(src), 0o644)
		return f
	}
	userFile, withoutFile := file("user.yaml", user), file("without.yaml", without)
	if out, code := etcd("apply", file("attached.yaml", attached)); code != 0 {
		t.Fatalf("apply with c-one: exit %d %s", code, out)
	}
	out, code := etcd("apply", userFile)
	if code != 0 || !strings.Contains(out, "kept as they are now") || !strings.Contains(out, "VM c-one on hv1 (container one)") {
		t.Errorf("apply of the user's file: exit %d\n%s", code, out)
	}
	hist, _ := etcd("history", "apk")
	for _, args := range [][]string{{"apply", withoutFile}, {"apply", withoutFile, "--dry-run"}} {
		out, code = etcd(args...)
		if code != 2 || !strings.Contains(out, "apply apk: "+withoutFile+" has no place") ||
			!strings.Contains(out, "VM c-one on hv1 (container one; eth0 in namespace ctr1 on pg-ctr, CNI network web): no port group pg-ctr") ||
			!strings.Contains(out, "--drop-attached") {
			t.Errorf("%v over c-one: exit %d\n%s", args, code, out)
		}
	}
	if out, _ := etcd("history", "apk"); out != hist {
		t.Errorf("the refused apply changed the history:\n%s\nwas\n%s", out, hist)
	}
	out, code = etcd("diff", "apk", withoutFile)
	if code != 1 || !strings.Contains(out, "in the way: the apply or the rollback refuses") || !strings.Contains(out, "- vm c-one") {
		t.Errorf("diff of the file: exit %d\n%s", code, out)
	}
	out, code = etcd("apply", withoutFile, "--drop-attached")
	if code != 0 || !strings.Contains(out, "taken out (--drop-attached), under their runtimes:\n  VM c-one") {
		t.Errorf("apply --drop-attached: exit %d\n%s", code, out)
	}
	if out, _ = etcd("get", "apk"); strings.Contains(out, "c-one") || strings.Contains(out, "pg-ctr") {
		t.Errorf("after the apply:\n%s", out)
	}
}
