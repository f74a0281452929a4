package service

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
)

// Exec runs argv inside a node's namespace and, for a VM with a CPU limit,
// its cgroup, in place of this process: the command's stdio and exit
// status are its own. node is INFRA/NODE, or NODE when exactly one applied
// infrastructure has a VM or host of that name.
func (l *Local) Exec(node string, argv []string) error {
	dp, err := dataplane.New()
	if err != nil {
		return err
	}
	ns, cgroup, err := l.resolveNode(node)
	if err != nil {
		return err
	}
	return dataplane.Exec(ns, dp.Cgroups(), cgroup, argv)
}

// resolveNode finds the namespace (and VM cgroup) of INFRA/NODE, or of NODE
// when exactly one infrastructure has it.
func (l *Local) resolveNode(arg string) (ns, cgroup string, err error) {
	infra, node, qualified := strings.Cut(arg, "/")
	if !qualified {
		infra, node = "", arg
	}
	recs, err := l.records(nil, nil)
	if err != nil {
		return "", "", err
	}
	agents := l.agentRecords(recs)
	recs = append(recs, agents...)
	var found []string
	for _, rec := range recs {
		if infra != "" && rec.Name != infra {
			continue
		}
		doc, err := l.docOf(rec)
		if err != nil {
			continue
		}
		if slices.Contains(agents, rec) && !nsExists(plan.NSName(rec.Name, node)) {
			continue // a cluster's node on another machine
		}
		if vm, ok := doc.Spec.VM(node); ok {
			found = append(found, rec.Name)
			ns, cgroup = plan.NSName(rec.Name, node), ""
			if vm.CPUs > 0 {
				cgroup = plan.CgroupName(rec.Name, node)
			}
		} else if _, ok := doc.Spec.Host(node); ok {
			found = append(found, rec.Name)
			ns, cgroup = plan.NSName(rec.Name, node), ""
		}
	}
	switch len(found) {
	case 0:
		return "", "", tagged{ErrInvalid, fmt.Sprintf("exec: no applied infrastructure has a VM or host %q", arg)}
	case 1:
		return ns, cgroup, nil
	}
	return "", "", tagged{ErrInvalid, fmt.Sprintf("exec: %q is in several infrastructures (%s); write INFRA/%s", node, strings.Join(found, ", "), node)}
}

// agentRecords are the records of what a cluster's host agent (vnet agent
// host) of this state directory realized on this machine, but those of
// infrastructures the directory's own store has. Their specs name the
// whole cluster's nodes, of which only this host's exist here. None when
// no agent ran here.
func (l *Local) agentRecords(own []*store.Record) []*store.Record {
	dir := filepath.Join(l.StateDir, "hostagent")
	if !store.Exists(dir) {
		return nil
	}
	st, err := store.OpenBolt(dir)
	if err != nil {
		return nil
	}
	defer st.Close()
	recs, err := st.List()
	if err != nil {
		return nil
	}
	var out []*store.Record
	for _, r := range recs {
		if !slices.ContainsFunc(own, func(o *store.Record) bool { return o.Name == r.Name }) {
			out = append(out, r)
		}
	}
	return out
}

// nsExists says whether a named network namespace exists on this machine.
func nsExists(name string) bool {
	_, err := os.Stat(filepath.Join(dataplane.NetnsDir, name))
	return err == nil
}
