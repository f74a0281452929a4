package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/lab"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
)

// Shell completion (vnet completion bash|zsh|fish) offers what the
// infrastructures hold: their names, their VMs, port groups and networks,
// and the lab's experiments. It asks where the command would act (--server,
// --etcd, --state-dir as given so far), briefly: a completion that cannot
// read the state offers nothing rather than make the shell wait.

// completionTimeout bounds what a completion waits for.
const completionTimeout = 2 * time.Second

// appliedSpecs are the applied infrastructures' specs, by name (all when
// only is empty), where the command would find them.
func appliedSpecs(only string) map[string]*spec.Spec {
	out := map[string]*spec.Spec{}
	withApplied(func(ctx context.Context, svc service.Service, list []service.Infra) {
		for _, in := range list {
			if only != "" && in.Name != only {
				continue
			}
			full, err := svc.Get(ctx, in.Name)
			if err != nil {
				continue
			}
			if doc, err := svc.Load(full.SpecFile, full.Spec); err == nil {
				out[in.Name] = doc.Spec
			}
		}
	})
	return out
}

// infraNamesApplied are the names of the applied infrastructures.
func infraNamesApplied() []string {
	var names []string
	withApplied(func(_ context.Context, _ service.Service, list []service.Infra) {
		for _, in := range list {
			names = append(names, in.Name)
		}
	})
	return names
}

// withApplied calls f with the service where the command would act and
// its applied infrastructures, within completionTimeout; not at all when
// they cannot be read.
func withApplied(f func(ctx context.Context, svc service.Service, list []service.Infra)) {
	svc, err := backend(infraCmds)
	if err != nil {
		return
	}
	defer svc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	if list, err := svc.List(ctx); err == nil {
		f(ctx, svc, list)
	}
}

// completeInfras offers the applied infrastructures as a command's first
// argument, and spec files when there are none.
func completeInfras(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := withPrefix(infraNamesApplied(), toComplete)
	if len(names) == 0 {
		return nil, cobra.ShellCompDirectiveDefault // a spec file
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeInfraThenFile offers an applied infrastructure as the first
// argument and a file as the second (diff's spec, snapshot's output).
func completeInfraThenFile(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 1 {
		return nil, cobra.ShellCompDirectiveDefault
	}
	return completeInfras(c, args, toComplete)
}

// completeInfraOnly offers an applied infrastructure as the one argument
// of a command that takes no file (get, history, rollback).
func completeInfraOnly(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return withPrefix(infraNamesApplied(), toComplete), cobra.ShellCompDirectiveNoFileComp
}

// describeKinds are the kinds describe shows, each with the names of its
// objects in a spec.
var describeKinds = []struct {
	kind  string
	names func(*spec.Spec) []string
}{{service.DescribeVM, specVMs}, {service.DescribePortGroup, specPortGroups}, {service.DescribeNetwork, specNetworks}}

// completeDescribe offers describe's arguments: an applied
// infrastructure, a kind, and the names of that kind it holds.
func completeDescribe(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	var out []string
	switch len(args) {
	case 0:
		return completeInfraOnly(c, args, toComplete)
	case 1:
		for _, k := range describeKinds {
			out = append(out, k.kind)
		}
	case 2:
		kind, err := service.DescribeKind(args[1])
		for _, k := range describeKinds {
			if err != nil || k.kind != kind {
				continue
			}
			for _, s := range appliedSpecs(args[0]) {
				out = append(out, k.names(s)...)
			}
		}
		slices.Sort(out)
	}
	return withPrefix(out, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeNames offers, as the value of a command's flag, the names the
// spec of its first argument's infrastructure holds (of every applied
// infrastructure when no argument names one).
func completeNames(c *cobra.Command, flag string, names func(*spec.Spec) []string) {
	_ = c.RegisterFlagCompletionFunc(flag, func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		only := ""
		if len(args) > 0 {
			only = args[0]
		}
		var out []string
		for _, s := range appliedSpecs(only) {
			out = append(out, names(s)...)
		}
		slices.Sort(out)
		return withPrefix(slices.Compact(out), toComplete), cobra.ShellCompDirectiveNoFileComp
	})
}

func specVMs(s *spec.Spec) []string {
	var out []string
	for _, vm := range s.VMs {
		out = append(out, vm.Name)
	}
	return out
}

func specNetworks(s *spec.Spec) []string {
	var out []string
	for _, n := range s.Networks {
		out = append(out, n.Name)
	}
	return out
}

func specPortGroups(s *spec.Spec) []string {
	var out []string
	for _, sw := range s.Switches {
		for _, pg := range sw.PortGroups {
			out = append(out, pg.Name)
		}
	}
	return out
}

// specNodes are a spec's VMs and hosts, which vnet exec enters.
func specNodes(s *spec.Spec) []string {
	out := specVMs(s)
	for _, h := range s.Hosts {
		out = append(out, h.Name)
	}
	return out
}

// completeNodes offers vnet exec's first argument: every applied
// infrastructure's VMs and hosts, also as INFRA/NODE.
func completeNodes(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveDefault // the command, after --
	}
	var out []string
	for name, s := range appliedSpecs("") {
		for _, n := range specNodes(s) {
			out = append(out, n, name+"/"+n)
		}
	}
	slices.Sort(out)
	return withPrefix(slices.Compact(out), toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeVNIC offers link's and unlink's arguments: a VM, one of its
// vNICs, and (link) a port group of its infrastructure.
func completeVNIC(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, s := range appliedSpecs("") {
		switch len(args) {
		case 0:
			out = append(out, specVMs(s)...)
		case 1:
			if vm, ok := s.VM(args[0]); ok {
				for i := range vm.NICs {
					out = append(out, fmt.Sprintf("eth%d", i))
				}
			}
		case 2:
			if _, ok := s.VM(args[0]); ok {
				out = append(out, specPortGroups(s)...)
			}
		}
	}
	slices.Sort(out)
	return withPrefix(slices.Compact(out), toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeExperiments offers the lab's experiments.
func completeExperiments(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, e := range lab.Catalog {
		out = append(out, e.Name)
	}
	return withPrefix(out, toComplete), cobra.ShellCompDirectiveNoFileComp
}

func withPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}
