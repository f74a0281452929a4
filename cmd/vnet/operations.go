package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/oneshot"
	"github.com/vnet-project/vnet/internal/service"
)

// The verbs of an infrastructure's life after its apply: history, diff,
// rollback, get, describe, snapshot and restore. Each is flags, one call
// of the service, and how to print the result.

// outputFlag gives a command -o with the formats it prints, the first the
// default, kept in out: the same flag as addOutputFlag's, so an unknown
// format is refused as the flags are read, as every command's is.
func outputFlag(c *cobra.Command, out *string, formats ...string) {
	*out = formats[0]
	addOutputFlag(c, "", formats...).bound = out
}

// printAs prints v as JSON or YAML, YAML with JSON's names (printYAML), as
// every command's -o does.
func printAs(out io.Writer, format string, v any) error {
	if format == outJSON {
		return printJSON(out, v)
	}
	return printYAML(out, v)
}

func historyCmd() *cobra.Command {
	var output, keep, maxAge string
	c := &cobra.Command{
		Use:   "history [INFRA [GENERATION]]",
		Short: "List an infrastructure's changes (who, when, from where, what), or show one generation's spec",
		Long: "List an infrastructure's history, oldest first: an entry per apply, link, unlink, rollback, restore and destroy, " +
			"with the generation it left, who made it (an API token's name, or user@host), from where, and what changed; " +
			"and one per pause and resume, under the generation it kept, saying what it paused or resumed. " +
			"The generation in force is marked *. A destroyed infrastructure's history stays, so that a rollback can bring it back.\n\n" +
			"With a GENERATION, print that generation's spec as it was stored.\n\n" +
			"--keep and --max-age set how much history the store keeps, for every infrastructure and every writer " +
			"(on this machine, in etcd, or on the --server's store): the newest N entries (default 100), none older " +
			"than the age, and always the generation in force.",
		Example: `  vnet history demo                     # the entries, oldest first
  vnet history demo -o yaml             # the same for scripts (json too)
  vnet history demo 2                   # generation 2's spec, as stored
  vnet history --keep 50 --max-age 30d  # keep at most 50 entries, none older than 30 days
  vnet history --etcd http://10.0.0.1:2379 dc`,
		Args:              cobra.MaximumNArgs(2),
		ValidArgsFunction: completeInfraOnly,
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := backend(infraCmds)
			if err != nil {
				return err
			}
			defer svc.Close()
			out := cmd.OutOrStdout()
			if keep != "" || maxAge != "" {
				return setRetention(cmd, svc, keep, maxAge, len(args) == 0)
			}
			if len(args) == 0 {
				ret, err := svc.HistoryRetention(cmd.Context())
				if err != nil {
					return err
				}
				if output != "text" {
					// What it keeps, as the text says it: the stored
					// form's zeroes stand for defaults.
					return printAs(out, output, ret.Effective())
				}
				fmt.Fprintf(out, "each infrastructure keeps %s\n", ret)
				return nil
			}
			if len(args) == 2 {
				return printGeneration(cmd, svc, args[0], args[1], output)
			}
			h, err := svc.History(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if output != "text" {
				return printAs(out, output, h)
			}
			printHistory(out, h)
			return nil
		},
	}
	outputFlag(c, &output, "text", "json", "yaml")
	c.Flags().StringVar(&keep, "keep", "", "keep at most this many entries per infrastructure (1 to 10000; the store's setting, for every writer)")
	c.Flags().StringVar(&maxAge, "max-age", "", "keep no entry older than this (30d, 2w, 720h; \"any\" for no limit)")
	addEtcdFlag(c)
	return c
}

// setRetention sets the store's retention from --keep and --max-age, the
// one not given as it was.
func setRetention(cmd *cobra.Command, svc service.Service, keep, maxAge string, alone bool) error {
	if !alone {
		return usageError{errors.New("history: --keep and --max-age are the store's, for every infrastructure: give no INFRA")}
	}
	r, err := svc.HistoryRetention(cmd.Context())
	if err != nil {
		return err
	}
	if keep != "" {
		n, err := strconv.Atoi(keep)
		if err != nil || n < 1 || n > history.MaxEntriesLimit {
			return usageError{fmt.Errorf("--keep %s: want a number from 1 to %d", keep, history.MaxEntriesLimit)}
		}
		r.MaxEntries = n
	}
	switch maxAge {
	case "":
	case history.AnyAge:
		r.MaxAge = 0
	default:
		if r.MaxAge, err = history.ParseAge(maxAge); err != nil {
			return usageError{fmt.Errorf("--max-age: %w", err)}
		}
	}
	if err := svc.SetHistoryRetention(cmd.Context(), r); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "each infrastructure keeps %s\n", r)
	return nil
}

func printHistory(out io.Writer, h *service.HistoryResult) {
	switch {
	case h.Current > 0:
		fmt.Fprintf(out, "infra %s: generation %d in force (*)\n", h.Infra, h.Current)
	default:
		fmt.Fprintf(out, "infra %s: not applied (destroyed); vnet rollback %s applies its last generation again\n", h.Infra, h.Infra)
	}
	fmt.Fprintf(out, "keeps %s\n\n", h.Retention)
	history.WriteTable(out, h.Entries, h.Current, time.Local)
}

func printGeneration(cmd *cobra.Command, svc service.Service, name, gen, output string) error {
	g, err := strconv.Atoi(gen)
	if err != nil || g < 1 {
		return usageError{fmt.Errorf("history %s %s: want a generation, a number from 1", name, gen)}
	}
	e, err := svc.Generation(cmd.Context(), name, g)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if output != "text" {
		return printAs(out, output, e)
	}
	_, err = out.Write(e.Spec)
	return err
}

func diffCmd() *cobra.Command {
	var from, to int
	var withPlan bool
	var output string
	c := &cobra.Command{
		Use:   "diff INFRA FILE | FILE | INFRA --from G1 [--to G2]",
		Short: "Show what a spec, or another generation, changes against the applied spec; exit 0 equal, 1 different",
		Long: "Compare a spec file with the spec an infrastructure has applied, or two generations of its history " +
			"(--from and --to; the one left out is the generation in force), object by object and field by field: " +
			"VMs, vNICs, port groups, pools, networks, ACL rules and the rest, added (+), removed (-) or changed (~). " +
			"The file's networks that leave their VNI out are compared with the VNIs an apply would store.\n\n" +
			"--plan adds what applying the newer side would change in the kernel: on this machine read from its kernel " +
			"(as apply --dry-run), over etcd per host against what its agent last reported realizing (modelled: no host's " +
			"kernel is read from here); between two generations neither of which is in force, modelled from the two specs. " +
			"Each plan says what it was worked out against.\n\n" +
			"Between two generations it also lists the pauses and resumes made between them: what is paused is kept " +
			"beside the spec, so they are shown but not compared.\n\n" +
			"Exit status, as diff's: 0 when the two say the same, 1 when they differ, 2 for bad input or any other trouble.",
		Example: `  vnet diff demo edited.yaml           # what applying edited.yaml would change in the spec
  vnet diff edited.yaml                # the same: the file names the infrastructure
  vnet diff demo edited.yaml --plan    # and the kernel's plan
  vnet diff demo --from 2              # generation 2 against the one in force
  vnet diff demo --to 2 --plan         # what rolling back to generation 2 would do
  vnet diff demo --from 1 --to 3 -o json`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeInfraThenFile,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := runDiff(cmd, args, from, to, withPlan, output)
			if err != nil {
				return exitError{code: exitBadInput, msg: err.Error()}
			}
			if !res.Equal() {
				return exitError{code: exitFailure}
			}
			return nil
		},
	}
	c.Flags().IntVar(&from, "from", 0, "the older generation (default: the one in force)")
	c.Flags().IntVar(&to, "to", 0, "the newer generation (default: the one in force)")
	c.Flags().BoolVar(&withPlan, "plan", false, "add the kernel's plan of applying the newer side")
	outputFlag(c, &output, "text", "json", "yaml")
	addEtcdFlag(c)
	return c
}

func runDiff(cmd *cobra.Command, args []string, from, to int, withPlan bool, output string) (*service.DiffResult, error) {
	svc, err := backend(infraCmds)
	if err != nil {
		return nil, err
	}
	defer svc.Close()
	req := service.DiffRequest{From: from, To: to, Plan: withPlan}
	name := args[0]
	switch {
	case len(args) == 2:
		req.Source = &service.Source{File: args[1]}
	case isFile(args[0]):
		doc, err := svc.LoadFile(args[0])
		if err != nil {
			return nil, err
		}
		name, req.Source = doc.Spec.Name, &service.Source{Doc: doc}
	case from == 0 && to == 0:
		return nil, usageError{fmt.Errorf("diff %s: give a FILE, or --from and --to generations", args[0])}
	}
	res, err := svc.Diff(cmd.Context(), name, req)
	if err != nil {
		return nil, err
	}
	out := cmd.OutOrStdout()
	if output != "text" {
		return res, printAs(out, output, res)
	}
	printDiff(out, res)
	return res, nil
}

func isFile(arg string) bool {
	st, err := os.Stat(arg)
	return err == nil && !st.IsDir()
}

func printDiff(out io.Writer, res *service.DiffResult) {
	fmt.Fprintf(out, "--- %s\n+++ %s\n", res.From, res.To)
	res.Diff.WriteText(out)
	if res.Equal() {
		fmt.Fprintln(out, "no change")
	} else {
		fmt.Fprintf(out, "(%s)\n", res.Summary)
	}
	printAttached(out, res.Attached, true)
	printPauses(out, res.Pauses)
	printHostPlans(out, res.Plans)
}

// keptListed is how many kept VMs an apply names: a node of a thousand pods
// keeps a thousand at every apply, which nobody reads line by line. Those
// in the way are always listed whole, since the user must act on each.
const keptListed = 10

// printAttached says what a rollback or a restore does (or, for a diff,
// would do) with the VMs runtimes attached.
func printAttached(out io.Writer, a *service.Attached, diff bool) {
	if a.Empty() {
		return
	}
	if len(a.Kept) > 0 {
		fmt.Fprintf(out, "\nkept as they are now, on their port groups and networks (runtimes attached them):\n")
		for _, vm := range a.Kept[:min(len(a.Kept), keptListed)] {
			fmt.Fprintf(out, "  VM %s on %s (container %s)\n", vm.VM, vm.Host, vm.Container)
		}
		if more := len(a.Kept) - keptListed; more > 0 {
			fmt.Fprintf(out, "  and %d more (vnet status lists every VM)\n", more)
		}
	}
	if len(a.LeftOut) > 0 {
		fmt.Fprintf(out, "\nleft out (runtimes had attached them, and have detached them since): %s\n", strings.Join(a.LeftOut, ", "))
	}
	if len(a.InTheWay) == 0 {
		return
	}
	if diff {
		fmt.Fprintf(out, "\nin the way: the apply or the rollback refuses, and with --drop-attached takes them out as shown:\n")
	} else {
		fmt.Fprintf(out, "\ntaken out (--drop-attached), under their runtimes:\n")
	}
	for _, vm := range a.InTheWay {
		fmt.Fprintf(out, "  VM %s on %s (container %s): %s\n", vm.VM, vm.Host, vm.Container, vm.Missing)
	}
}

// printPauses lists the pauses and resumes between two generations, which
// no spec holds and a rollback keeps as they are.
func printPauses(out io.Writer, pauses []history.Entry) {
	if len(pauses) == 0 {
		return
	}
	fmt.Fprintln(out, "\nbetween them, beside the spec (a rollback keeps what is paused as it is):")
	for _, e := range pauses {
		fmt.Fprintf(out, "  %d  %s  %s  %s\n", e.Seq, e.At.Local().Format(time.DateTime), e.Who, e.Summary)
	}
}

// printHostPlans prints plans, each under what it was worked out against.
func printHostPlans(out io.Writer, plans []service.HostPlan) {
	for _, p := range plans {
		what := "plan"
		if p.Host != "" {
			what = "plan for " + p.Host
		}
		fmt.Fprintf(out, "\n%s (%s):\n%s", what, p.Basis, service.PlanText(p.Actions))
	}
}

func rollbackCmd() *cobra.Command {
	var to int
	var dryRun, drop bool
	var wait time.Duration
	c := &cobra.Command{
		Use:   "rollback INFRA",
		Short: "Apply an earlier generation again, as a new generation (the previous one by default)",
		Long: "Take an earlier generation's spec from the infrastructure's history and apply it as a new generation, " +
			"with everything apply promises: on this machine a failed rollback leaves the host as it was; over etcd it is " +
			"stored as the next generation, which every host's agent realizes (--wait waits for them). Without --to it goes " +
			"back to the generation before the one in force: after a generation that every host failed, the last one that " +
			"worked. A destroyed infrastructure is brought back as it was before its destroy. What is paused stays paused, " +
			"as across any apply: vnet resume starts it again. The VMs that runtimes attached and still use (containers, pods and " +
			"libvirt guests, through the CNI plugin or the libvirt hook) stay as they are now; when that generation lacks the host, " +
			"port group or network one of them is on (or one of its own VMs has its name or address), the rollback is refused, " +
			"changing nothing, naming them (exit status 2), " +
			"unless --drop-attached takes them out.",
		Example: `  vnet rollback demo                   # back to the generation before the one in force
  vnet rollback demo --to 2 --dry-run  # the plan of going back to generation 2
  vnet rollback demo --to 1 --drop-attached   # and take out the containers' VMs generation 1 has no port group for
  vnet rollback --etcd http://10.0.0.1:2379 --wait dc   # and wait until every host is current`,
		Args:              exactArgs(1, "an infrastructure name"),
		ValidArgsFunction: completeInfraOnly,
		RunE: func(cmd *cobra.Command, args []string) error {
			oneshot.CollectLessOften()
			svc, err := backend(infraCmds)
			if err != nil {
				return err
			}
			defer svc.Close()
			out := cmd.OutOrStdout()
			res, err := svc.Rollback(cmd.Context(), args[0], service.RollbackOptions{To: to, Apply: applyOptions(out, dryRun, wait), DropAttached: drop})
			if err != nil {
				return err
			}
			if !dryRun {
				fmt.Fprintf(out, "rolled back %s to generation %d%s\n", res.Infra, res.To, storedAs(res.ApplyResult))
			}
			printApplied(out, res.ApplyResult, wait)
			printAttached(out, res.Attached, false)
			return nil
		},
	}
	c.Flags().IntVar(&to, "to", 0, "the generation to go back to (default: the one before the generation in force)")
	c.Flags().BoolVar(&drop, "drop-attached", false, "take out the VMs runtimes attached (containers, pods, libvirt guests) that generation has no place for (their host, port group or network gone, or their name or address one of its own VMs has), instead of refusing")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	addWaitFlag(c, &wait, "with --etcd, then wait up to this long (--wait=1m; alone: "+defaultWait.String()+") for every host to report the new generation current, as apply --wait does")
	addEtcdFlag(c)
	return c
}

// storedAs says, over etcd, which generation a change was stored as.
func storedAs(res *service.ApplyResult) string {
	if res.Stored == nil {
		return ""
	}
	if res.Stored.Unchanged {
		return fmt.Sprintf(": generation %d in etcd is that spec already", res.Stored.Generation)
	}
	return fmt.Sprintf(" as generation %d", res.Stored.Generation)
}

// applyOptions are how rollback and restore apply, printing as apply
// prints.
func applyOptions(out io.Writer, dryRun bool, wait time.Duration) service.ApplyOptions {
	return service.ApplyOptions{DryRun: dryRun, Wait: wait, Log: out, Detail: dryRun,
		Stored:   func(s service.Stored) { printStored(out, s, dryRun) },
		Progress: func(ev service.WaitEvent) { printCurrent(out, ev) },
	}
}

func getCmd() *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "get INFRA",
		Short: "Print the applied spec as stored, with the VNIs and MACs vnet chose written in",
		Long: "Print an infrastructure's spec as it was applied and stored, with every value vnet chose where the spec " +
			"left the choice to it written in: the networks' VNIs, the VNIs of switches carried between hosts, and the " +
			"vNICs' MACs (but those of TAPs, whose guests choose). Applied again, anywhere, it makes the same. " +
			"-o json prints the same spec as JSON, which vnet apply reads too.",
		Example: `  vnet get demo                  # the spec, as YAML
  vnet get demo -o json          # as JSON
  vnet get demo > demo-now.yaml  # a file to apply elsewhere, or to diff against`,
		Args:              exactArgs(1, "an infrastructure name"),
		ValidArgsFunction: completeInfraOnly,
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := backend(infraCmds)
			if err != nil {
				return err
			}
			defer svc.Close()
			a, err := svc.Applied(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			text := []byte(a.Spec)
			if output == "json" {
				if text, err = service.SpecJSON(text); err != nil {
					return err
				}
			}
			_, err = cmd.OutOrStdout().Write(text)
			return err
		},
	}
	outputFlag(c, &output, "yaml", "json")
	addEtcdFlag(c)
	return c
}

func describeCmd() *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "describe INFRA vm|portgroup|network NAME",
		Short: "Show one VM, port group or network: spec, kernel state, policy, counters and recent events",
		Long: "Show one object of an infrastructure: what the applied spec says of it, what vnet derives (its host, " +
			"namespace, switch, VNI, MACs), each of its ports as the kernel has it on this machine (over etcd: as its " +
			"host's agent reports) with its security policy and what its rules counted, its traffic counters (on this " +
			"machine), and the newest events that concern it.",
		Example: `  vnet describe demo vm web1
  vnet describe demo portgroup pg-web
  vnet describe dc network blue -o json`,
		Args:              exactArgs(3, "an infrastructure, a kind (vm, portgroup or network) and a name"),
		ValidArgsFunction: completeDescribe,
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := backend(infraCmds)
			if err != nil {
				return err
			}
			defer svc.Close()
			d, err := svc.Describe(cmd.Context(), args[0], args[1], args[2])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output != "text" {
				return printAs(out, output, d)
			}
			printDescription(out, d)
			return nil
		},
	}
	outputFlag(c, &output, "text", "json", "yaml")
	addEtcdFlag(c)
	return c
}

func printDescription(out io.Writer, d *service.Description) {
	fmt.Fprintf(out, "%s %s of %s\n", d.Kind, d.Name, d.Infra)
	for _, f := range d.Facts {
		fmt.Fprintf(out, "%s: %s\n", f.Name, f.Value)
	}
	if d.Spec != "" {
		fmt.Fprintf(out, "\nspec:\n%s", indent(d.Spec, "  "))
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PORT\tHOST\tON\tMAC\tIP\tSTATE\tPOLICY\tCOUNTED (packets)\tTX BYTES\tRX BYTES")
	for _, p := range d.Ports {
		name := p.VM + " " + p.Name
		if p.VM == "" {
			name = p.Host + " " + p.Name
		}
		on := p.PortGroup
		if p.Network != "" {
			on = "network " + p.Network
		}
		policy, counted := "-", "-"
		if p.Security != nil {
			policy, counted = p.Security.Policy, counterText(p.Security.Counters)
		}
		tx, rx := "-", "-"
		if p.Traffic != nil {
			tx, rx = strconv.FormatUint(p.Traffic.TxBytes, 10), strconv.FormatUint(p.Traffic.RxBytes, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, p.Host, on, p.MAC, dash(p.IP), p.State, policy, counted, tx, rx)
	}
	tw.Flush()
	if len(d.Events) > 0 {
		fmt.Fprintln(out, "\nEVENTS (newest first)")
		for _, ev := range d.Events {
			line := fmt.Sprintf("%s  %s by %s", ev.Time.Local().Format("2006-01-02 15:04:05"), ev.Action, ev.Who)
			if ev.Port != "" {
				line += " " + ev.Port
			}
			if ev.Error != "" {
				line += ": " + ev.Error
			} else if ev.Message != "" {
				line += ": " + ev.Message
			}
			fmt.Fprintln(out, line)
		}
	}
	for _, n := range d.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
}

func indent(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(prefix + line)
	}
	return b.String()
}

func snapshotCmd() *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "snapshot INFRA FILE",
		Short: "Write an infrastructure to a self-contained file that vnet restore makes anew, anywhere",
		Long: "Write a snapshot of an infrastructure: its spec as applied, with every VNI and MAC vnet chose written in, " +
			"the history entry of its generation, a format version and the spec's checksum. vnet restore makes the " +
			"infrastructure anew from it on this or another machine or cluster, with the same VNIs, MACs and addresses. " +
			"FILE - writes to standard output; an existing FILE is kept unless --force.",
		Example: `  vnet snapshot demo demo.snap
  vnet snapshot --etcd http://10.0.0.1:2379 dc dc.snap   # from a cluster, to restore in another
  vnet snapshot demo - | ssh hv9 vnet restore -`,
		Args:              exactArgs(2, "an infrastructure name and a file"),
		ValidArgsFunction: completeInfraThenFile,
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := backend(infraCmds)
			if err != nil {
				return err
			}
			defer svc.Close()
			snap, err := svc.Snapshot(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			data, err := snap.YAML()
			if err != nil {
				return err
			}
			if args[1] == "-" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			if err := writeNew(args[1], data, force); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s generation %d to %s (%s, %s pinned)\n", snap.Infra, snap.Generation, args[1],
				counted(len(snap.Allocations.VNIs), "VNI", "VNIs"), counted(len(snap.Allocations.MACs), "MAC", "MACs"))
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	addEtcdFlag(c)
	return c
}

// writeNew writes a file whole (a temporary file renamed into place), and
// refuses to replace one unless force.
func writeNew(path string, data []byte, force bool) error {
	if _, err := os.Lstat(path); err == nil && !force {
		return usageError{fmt.Errorf("%s exists: give another file, or --force to replace it", path)}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func restoreCmd() *cobra.Command {
	var dryRun bool
	var wait time.Duration
	c := &cobra.Command{
		Use:   "restore FILE",
		Short: "Make an infrastructure anew from a snapshot, with its VNIs, MACs and addresses",
		Long: "Make the infrastructure of a snapshot (vnet snapshot) here: on this machine, in the etcd --etcd names, or " +
			"through --server, as a new infrastructure whose history starts with the restore. It refuses a snapshot whose " +
			"spec does not match its checksum, an infrastructure of the same name that exists here (destroy it first), and a " +
			"VNI another infrastructure here uses. It applies as apply does: --dry-run prints the plan, --wait over etcd " +
			"waits for every host. FILE - reads standard input.",
		Example: `  vnet restore demo.snap
  vnet restore --dry-run demo.snap
  vnet restore --etcd http://10.0.1.1:2379 --wait dc.snap   # into another cluster`,
		Args: exactArgs(1, "a snapshot file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			oneshot.CollectLessOften()
			data, err := readSnapshot(cmd, args[0])
			if err != nil {
				return err
			}
			snap, err := service.ParseSnapshot(data)
			if err != nil {
				return err
			}
			svc, err := backend(infraCmds)
			if err != nil {
				return err
			}
			defer svc.Close()
			out := cmd.OutOrStdout()
			res, err := svc.Restore(cmd.Context(), snap, service.RestoreOptions{Apply: applyOptions(out, dryRun, wait)})
			if err != nil {
				return err
			}
			if !dryRun {
				fmt.Fprintf(out, "restored %s from its generation %d, taken %s from %s%s\n", snap.Infra, snap.Generation,
					snap.TakenAt.Local().Format("2006-01-02 15:04:05"), snap.TakenFrom, storedAs(res))
			}
			printApplied(out, res, wait)
			printAttached(out, res.Attached, false)
			return nil
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	addWaitFlag(c, &wait, "with --etcd, then wait up to this long (--wait=1m; alone: "+defaultWait.String()+") for every host to report the restored generation current, as apply --wait does")
	addEtcdFlag(c)
	return c
}

func readSnapshot(cmd *cobra.Command, path string) ([]byte, error) {
	var r io.Reader = cmd.InOrStdin()
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, service.MaxSnapshotBytes+1))
	if err != nil {
		return nil, err
	}
	return data, nil
}
