package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
)

func execCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "exec [INFRA/]VM|HOST -- CMD [ARGS...]",
		Short: "Run a command inside a VM's or host's namespace and cgroup",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || cmd.ArgsLenAtDash() != 1 {
				return usageError{fmt.Errorf("exec: want [INFRA/]NODE -- CMD [ARGS...]")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dp, err := dataplane.New()
			if err != nil {
				return err
			}
			st, err := store.OpenBolt(stateDir)
			if err != nil {
				return err
			}
			ns, cgroup, err := resolveNode(st, args[0])
			st.Close()
			if err != nil {
				return err
			}
			return dataplane.Exec(ns, dp.Cgroups(), cgroup, args[1:])
		},
	}
}

// resolveNode finds the namespace (and VM cgroup) of INFRA/NODE, or of NODE
// when exactly one infrastructure has it.
func resolveNode(st store.Store, arg string) (ns, cgroup string, err error) {
	infra, node, qualified := strings.Cut(arg, "/")
	if !qualified {
		infra, node = "", arg
	}
	recs, err := st.List()
	if err != nil {
		return "", "", err
	}
	var found []string
	cache := specCache()
	for _, rec := range recs {
		if infra != "" && rec.Name != infra {
			continue
		}
		doc, err := storedDoc(cache, rec)
		if err != nil {
			continue
		}
		if vm, ok := doc.Spec.VM(node); ok {
			found = append(found, rec.Name)
			ns = plan.NSName(rec.Name, node)
			cgroup = ""
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
		return "", "", usageError{fmt.Errorf("exec: no applied infrastructure has a VM or host %q", arg)}
	case 1:
		return ns, cgroup, nil
	}
	return "", "", usageError{fmt.Errorf("exec: %q is in several infrastructures (%s); write INFRA/%s", node, strings.Join(found, ", "), node)}
}
