package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// etcdFlag is --etcd of the commands that can keep their state in etcd;
// etcdTLS their --etcd-ca, --etcd-cert and --etcd-key.
var (
	etcdFlag string
	etcdTLS  etcdstore.TLSFiles
)

// addEtcdFlag gives a command --etcd and its TLS files; etcdEndpoints and
// openCluster read them.
func addEtcdFlag(c *cobra.Command) {
	c.Flags().StringVar(&etcdFlag, "etcd", "", "etcd endpoints, comma-separated, to keep the state in etcd for several hosts (default $VNET_ETCD; none: this host only)")
	c.Flags().StringVar(&etcdTLS.CA, "etcd-ca", "", "CA of etcd's certificate, for https endpoints (default $VNET_ETCD_CA; none: the system's)")
	c.Flags().StringVar(&etcdTLS.Cert, "etcd-cert", "", "client certificate for an etcd that asks for one (default $VNET_ETCD_CERT)")
	c.Flags().StringVar(&etcdTLS.Key, "etcd-key", "", "its key (default $VNET_ETCD_KEY)")
}

// etcdTLSFiles is the TLS flags, each falling back to its variable.
func etcdTLSFiles() etcdstore.TLSFiles {
	or := func(flag, env string) string {
		if flag != "" {
			return flag
		}
		return os.Getenv(env)
	}
	return etcdstore.TLSFiles{CA: or(etcdTLS.CA, "VNET_ETCD_CA"), Cert: or(etcdTLS.Cert, "VNET_ETCD_CERT"), Key: or(etcdTLS.Key, "VNET_ETCD_KEY")}
}

// etcdEndpoints is where the shared state lives: --etcd, else VNET_ETCD,
// else nowhere (nil), and vnet works on this host alone.
func etcdEndpoints() []string {
	if etcdFlag != "" {
		return etcdstore.ParseEndpoints(etcdFlag)
	}
	return etcdstore.ParseEndpoints(os.Getenv("VNET_ETCD"))
}

func openCluster(endpoints []string) (*etcdstore.Store, error) {
	return openClusterWith(endpoints, etcdTLSFiles())
}

func openClusterWith(endpoints []string, files etcdstore.TLSFiles) (*etcdstore.Store, error) {
	tc, err := files.Config()
	if err != nil {
		return nil, usageError{err}
	}
	return etcdstore.Open(etcdstore.Options{Endpoints: endpoints, TLS: tc})
}

func hostNames(s *spec.Spec) []string {
	names := make([]string, len(s.Hosts))
	for i, h := range s.Hosts {
		names[i] = h.Name
	}
	return names
}

// applyCluster stores the spec in file in etcd as the infrastructure's
// next generation, unless another apply changed it since this one read it.
// It changes nothing on this host: each host's agent realizes its own part.
// It reads the last generation from etcd while it loads the file.
// With wait > 0 it then waits that long at most for every host to report
// the generation current (see waitCurrent).
func applyCluster(cmd *cobra.Command, endpoints []string, file string, dryRun, full bool, wait time.Duration) error {
	start := time.Now()
	lap := traceLaps(cmd)
	last := make(chan lastGeneration, 1)
	go func() { last <- readLastGeneration(endpoints, fileSpecName(file)) }()
	doc, err := specCache().LoadFile(file)
	lap("load %s", file)
	if err == nil && full {
		err = errors.New("--full: only an apply on this host reads it; each host's agent reads everything every --interval")
	}
	if err != nil { // without waiting for etcd, which may not answer soon
		go func() {
			if got := <-last; got.st != nil {
				got.st.Close()
			}
		}()
		return err
	}
	got := <-last
	if got.st != nil {
		defer got.st.Close()
	}
	lap("read the last generation from etcd (meanwhile)")
	if got.err != nil {
		return got.err
	}
	st, name, out := got.st, doc.Spec.Name, cmd.OutOrStdout()
	old, rev, err := got.old, got.rev, got.getErr
	if got.name != name { // the file's name was not where fileSpecName looks
		old, rev, err = st.GetRev(name)
		lap("read the last generation from etcd")
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	// Networks' VNIs are stored with the spec, so that one left out keeps
	// the VNI it got, whatever networks come and go around it.
	cache := specCache()
	if doc, err = store.PinVNIs(doc, old, cache); err != nil {
		return err
	}
	lap("pin VNIs")
	gen := 1
	switch {
	case old == nil:
	case bytes.Equal(old.Spec, doc.Source):
		fmt.Fprintf(out, "%s: unchanged, generation %d in etcd\n", name, old.Generation)
		if wait > 0 && !dryRun {
			return waitCurrent(cmd, st, doc.Spec, old.Generation, rev, time.Now(), 0, wait)
		}
		return nil
	default:
		gen = old.Generation + 1
	}
	hosts := strings.Join(hostNames(doc.Spec), ", ")
	if dryRun {
		fmt.Fprintf(out, "would store %s generation %d in etcd for hosts %s\n", name, gen, hosts)
		return nil
	}
	// The agents make the spec of its encoding, not of its YAML.
	rec := &store.Record{Name: name, SpecFile: doc.File, Spec: doc.Source, SpecEncoded: speccache.EncodeValidated(doc),
		Generation: gen, AppliedAt: time.Now().UTC()}
	lap("encode")
	storedRev, err := st.PutIf(rec, rev)
	if err != nil {
		return fmt.Errorf("apply %s: %w", name, err)
	}
	lap("store generation %d", gen)
	cache.AddEncoded(doc, rec.SpecEncoded)
	lap("cache the spec")
	fmt.Fprintf(out, "stored %s generation %d in etcd for hosts %s\n", name, gen, hosts)
	if wait > 0 {
		stored := time.Now()
		return waitCurrent(cmd, st, doc.Spec, gen, storedRev, stored, stored.Sub(start), wait)
	}
	return nil
}

// defaultWait is how long a bare --wait waits.
const defaultWait = 2 * time.Minute

// addWaitFlag gives apply and destroy --wait, whose value is optional: a
// bare --wait waits defaultWait.
func addWaitFlag(c *cobra.Command, wait *time.Duration, usage string) {
	c.Flags().DurationVar(wait, "wait", 0, usage)
	c.Flags().Lookup("wait").NoOptDefVal = defaultWait.String()
}

// waitCurrent waits, at most limit from stored, for every host of the spec
// to report generation gen, stored at etcd revision rev, current, printing
// each host as it gets there with the time since stored. storing is how
// long the command took to store the generation (0: it stored nothing).
func waitCurrent(cmd *cobra.Command, st *etcdstore.Store, s *spec.Spec, gen int, rev int64, stored time.Time, storing, limit time.Duration) error {
	out := cmd.OutOrStdout()
	ctx, cancel := context.WithDeadline(cmd.Context(), stored.Add(limit))
	defer cancel()
	hosts := hostNames(s)
	err := st.WaitCurrent(ctx, s.Name, gen, rev, hosts, func(ev etcdstore.HostEvent) {
		switch {
		case ev.State == etcdstore.HostCurrent:
			fmt.Fprintf(out, "%s current at generation %d after %s\n", ev.Host, gen, seconds(time.Since(stored)))
		case ev.State == etcdstore.HostGone && ev.Report == nil && !slices.Contains(hosts, ev.Host):
			fmt.Fprintf(out, "%s, no longer in the spec, withdrew its report after %s\n", ev.Host, seconds(time.Since(stored)))
		}
	})
	if err != nil {
		return waitFailed(fmt.Sprintf("apply %s", s.Name), limit, err)
	}
	took := seconds(time.Since(stored))
	if storing > 0 {
		took += fmt.Sprintf(" after the store (stored in %s)", seconds(storing))
	}
	fmt.Fprintf(out, "%s generation %d: %s current in %s\n", s.Name, gen, counted(len(hosts), "host", "hosts"), took)
	return nil
}

// waitWithdrawn waits, at most limit from removed, until no host reports
// the infrastructure, deleted at etcd revision rev, printing each host as
// its report goes, or as it reports that removing its part failed.
func waitWithdrawn(cmd *cobra.Command, st *etcdstore.Store, name string, rev int64, removed time.Time, limit time.Duration) error {
	out := cmd.OutOrStdout()
	ctx, cancel := context.WithDeadline(cmd.Context(), removed.Add(limit))
	defer cancel()
	n := 0
	err := st.WaitWithdrawn(ctx, name, rev, func(ev etcdstore.HostEvent) {
		switch {
		case ev.State == etcdstore.HostGone && ev.Report == nil:
			n++
			fmt.Fprintf(out, "%s withdrew its report after %s\n", ev.Host, seconds(time.Since(removed)))
		case ev.State == etcdstore.HostFailed:
			fmt.Fprintf(out, "%s failed to remove its part after %s: %s\n", ev.Host, seconds(time.Since(removed)), strings.Join(ev.Report.Errors, "; "))
		}
	})
	if err != nil {
		return waitFailed("destroy "+name, limit, err)
	}
	fmt.Fprintf(out, "%s: no host reports it (%s withdrawn in %s)\n", name, counted(n, "report", "reports"), seconds(time.Since(removed)))
	return nil
}

// waitFailed says why a wait ended short; running out of time has an exit
// status of its own, so that a script can tell it from a failure.
func waitFailed(what string, limit time.Duration, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return exitError{code: exitTimedOut, msg: fmt.Sprintf("%s: --wait=%s ran out: %v", what, limit, err)}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// seconds prints a duration as the wait's lines do: "0.41 s".
func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// lastGeneration is what applyCluster reads of etcd before it knows the
// spec: the store, and the record of the infrastructure name (when named)
// with its revision.
type lastGeneration struct {
	st     *etcdstore.Store
	err    error // opening the store
	name   string
	old    *store.Record
	rev    int64
	getErr error
}

func readLastGeneration(endpoints []string, name string) lastGeneration {
	st, err := openCluster(endpoints)
	if err != nil {
		return lastGeneration{err: err}
	}
	g := lastGeneration{st: st, name: name}
	if name != "" {
		g.old, g.rev, g.getErr = st.GetRev(name)
	}
	return g
}

// fileSpecName is the infrastructure name a spec file gives on a line of its
// own before anything else nested (name: NAME), or "" when it gives none
// there. It only lets the record be read before the file is loaded: the
// loaded spec's name decides.
func fileSpecName(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	return nameLine(head[:n])
}

// nameLine finds the top-level "name:" line in the head of a YAML file,
// before the first line that is indented or starts a list.
func nameLine(head []byte) string {
	for line := range strings.Lines(string(head)) {
		line = strings.TrimRight(line, "\r\n")
		if v, ok := strings.CutPrefix(line, "name:"); ok {
			v = strings.TrimSpace(v)
			if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
				v = v[1 : len(v)-1]
			}
			if strings.ContainsAny(v, " #{}[],&*!|>'\"%@`") {
				return ""
			}
			return v
		}
		if line == "" || line[0] == ' ' || line[0] == '\t' || line[0] == '-' || line[0] == '#' {
			continue
		}
	}
	return ""
}

// traceLaps prints, with VNET_TRACE set, the time since the last lap.
func traceLaps(cmd *cobra.Command) func(format string, args ...any) {
	if os.Getenv("VNET_TRACE") == "" {
		return func(string, ...any) {}
	}
	return reconcile.Stopwatch(func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format, args...) })
}

// destroyCluster removes the infrastructure's spec from etcd, unless it was
// applied again since this command read it.
// With wait > 0 it then waits that long at most for every host's report of
// it to go (see waitWithdrawn).
func destroyCluster(cmd *cobra.Command, endpoints []string, name string, wait time.Duration) error {
	st, err := openCluster(endpoints)
	if err != nil {
		return err
	}
	defer st.Close()
	rec, rev, err := st.GetRev(name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("destroy %s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("destroy %s: %w", name, err)
	}
	deleted, err := st.DeleteIfRev(name, rev)
	if err != nil {
		return fmt.Errorf("destroy %s: %w", name, err)
	}
	removed := time.Now()
	fmt.Fprintf(cmd.OutOrStdout(), "removed %s (generation %d) from etcd\n", name, rec.Generation)
	if wait > 0 {
		return waitWithdrawn(cmd, st, name, deleted, removed, wait)
	}
	return nil
}

// clusterStatus is one infrastructure as etcd knows it.
type clusterStatus struct {
	Name       string               `json:"name"`
	SpecFile   string               `json:"spec_file"`
	Generation int                  `json:"generation"`
	AppliedAt  time.Time            `json:"applied_at"`
	Converged  bool                 `json:"converged"`
	Hosts      []etcdstore.HostView `json:"hosts"`
	// Removed says the record is gone (destroyed) while hosts still
	// report it: one whose removal failed is failed, with its errors.
	Removed bool `json:"removed,omitempty"`
	// Damaged says why the record in etcd does not read as its spec: the
	// hosts that hold the infrastructure keep it as it stands.
	Damaged string `json:"damaged,omitempty"`
}

func statusCluster(cmd *cobra.Command, endpoints []string, args []string, output string) error {
	st, err := openCluster(endpoints)
	if err != nil {
		return err
	}
	defer st.Close()
	recs, removed, err := selectClusterRecords(st, args)
	if err != nil {
		return err
	}
	all := []clusterStatus{}
	cache := specCache()
	for _, rec := range recs {
		doc, err := storedDoc(cache, rec)
		reports, rerr := st.Reports(rec.Name)
		if rerr != nil {
			return rerr
		}
		if errors.Is(err, store.ErrDamagedRecord) { // that infrastructure's alone
			all = append(all, clusterStatus{Name: rec.Name, Damaged: err.Error(), Hosts: etcdstore.Assess(0, nil, reports)})
			continue
		}
		if err != nil {
			return err
		}
		views := etcdstore.Assess(rec.Generation, hostNames(doc.Spec), reports)
		all = append(all, clusterStatus{Name: rec.Name, SpecFile: rec.SpecFile, Generation: rec.Generation,
			AppliedAt: rec.AppliedAt, Converged: etcdstore.Converged(views), Hosts: views})
	}
	for _, name := range removed {
		reports, err := st.Reports(name)
		if err != nil {
			return err
		}
		if len(reports) == 0 { // withdrawn since it was listed
			continue
		}
		all = append(all, clusterStatus{Name: name, Removed: true, Hosts: etcdstore.Assess(0, nil, reports)})
	}
	out := cmd.OutOrStdout()
	if output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	if len(all) == 0 {
		fmt.Fprintln(out, "no infrastructures")
	}
	for _, cs := range all {
		printClusterStatus(out, cs, time.Now())
	}
	return nil
}

// selectClusterRecords is selectRecords, and the infrastructures whose
// record is gone (destroyed) but that some host still reports: those args
// name, or with no args every one.
func selectClusterRecords(st *etcdstore.Store, args []string) ([]*store.Record, []string, error) {
	if len(args) == 0 {
		recs, err := st.List()
		if err != nil {
			return nil, nil, err
		}
		reported, err := st.Reported()
		if err != nil {
			return nil, nil, err
		}
		stored := make(map[string]bool, len(recs))
		for _, r := range recs {
			stored[r.Name] = true
		}
		var removed []string
		for _, name := range reported {
			if !stored[name] {
				removed = append(removed, name)
			}
		}
		return recs, removed, nil
	}
	var recs []*store.Record
	var removed []string
	for _, a := range args {
		name, err := infraName(a)
		if err != nil {
			return nil, nil, err
		}
		r, err := recordHead(st, name)
		if errors.Is(err, store.ErrNotFound) {
			reports, rerr := st.Reports(name)
			if rerr != nil {
				return nil, nil, rerr
			}
			if len(reports) > 0 {
				removed = append(removed, name)
				continue
			}
		}
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, r)
	}
	return recs, removed, nil
}

func printClusterStatus(out io.Writer, cs clusterStatus, now time.Time) {
	if cs.Removed {
		fmt.Fprintf(out, "infra %s (destroyed: no longer in etcd, but hosts still report it)\n", cs.Name)
	} else if cs.Damaged != "" {
		fmt.Fprintf(out, "infra %s (damaged: %s)\n", cs.Name, cs.Damaged)
	} else {
		fmt.Fprintf(out, "infra %s (generation %d, from %s, applied %s)\n", cs.Name, cs.Generation, cs.SpecFile, cs.AppliedAt.Local().Format(time.DateTime))
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "\nHOST\tSTATE\tGENERATION\tRESOURCES\tREPORTED\tERRORS")
	count := map[etcdstore.HostState]int{}
	for _, v := range cs.Hosts {
		count[v.State]++
		if v.Report == nil {
			fmt.Fprintf(w, "%s\t%s\t-\t-\t-\t\n", v.Host, v.State)
			continue
		}
		r := v.Report
		age := now.Sub(r.At).Round(time.Second)
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s ago\t%s\n", v.Host, v.State, r.Generation, r.Resources, age, strings.Join(r.Errors, "; "))
	}
	w.Flush()
	var parts []string
	for _, s := range []etcdstore.HostState{etcdstore.HostCurrent, etcdstore.HostLagging, etcdstore.HostFailed, etcdstore.HostGone, etcdstore.HostUnexpected} {
		if count[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[s], s))
		}
	}
	fmt.Fprintf(out, "\n%s: %s\n\n", counted(len(cs.Hosts), "host", "hosts"), strings.Join(parts, ", "))
	printHostSecurity(out, cs.Hosts)
}
