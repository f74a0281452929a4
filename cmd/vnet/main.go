// Command vnet builds virtual infrastructures on the Linux kernel datapath
// and measures them. Each subcommand is flags, one call of the service
// layer (internal/service), and how to print its result and exit.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/api"
	"github.com/vnet-project/vnet/internal/cni"
	"github.com/vnet-project/vnet/internal/libvirthook"
	"github.com/vnet-project/vnet/internal/service"
)

// Exit statuses: 2 for bad input (as validate promises), 3 for a --wait
// that ran out of time, 1 for anything else.
const (
	exitFailure  = 1
	exitBadInput = 2
	exitTimedOut = 3
)

// openAttachServer is how the CNI plugin reaches the vnet server its
// configuration names: through the API's client, which the plugin's
// package sits beside rather than above.
func openAttachServer(s cni.Server) (service.AttachBackend, error) {
	return api.OpenAttachServer(api.AttachServer{URL: s.URL, TokenFile: s.TokenFile, CA: s.CA})
}

// usageError marks errors in how the command was called.
type usageError struct{ error }

func main() {
	if cni.Invoked(os.Args) {
		// The plugin as vnet-cni builds it, here with the CPU profile
		// VNET_CPUPROFILE asks for: a link named vnet-cni to vnet works
		// as well, and starts slower (docs/containers.md).
		stop := startCPUProfile()
		cni.Main(openAttachServer) // a container runtime's CNI plugin (docs/containers.md)
		stop()
		return
	}
	if libvirthook.Invoked(os.Args) {
		libvirthook.Main() // libvirt's QEMU hook (docs/libvirt.md)
		return
	}
	stop := startCPUProfile()
	root := newRoot()
	err := root.Execute()
	stop()
	if err == nil {
		return
	}
	var ue usageError
	if msg := err.Error(); msg != "" { // diff's "different" says nothing more
		fmt.Fprintln(os.Stderr, "vnet:", msg)
	}
	var ee exitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case errors.Is(err, service.ErrTimedOut):
		os.Exit(exitTimedOut)
	case errors.Is(err, service.ErrInvalid), errors.Is(err, service.ErrAttached), errors.As(err, &ue):
		os.Exit(exitBadInput)
	default:
		os.Exit(exitFailure)
	}
}

// startCPUProfile writes a CPU profile of the command to the file
// VNET_CPUPROFILE names, for finding where a slow command spends its time
// (go tool pprof bin/vnet FILE...). A "%p" in the name is the process's
// ID: a runtime starts the CNI plugin anew for every call, and each call
// then keeps its own profile, which pprof sums.
// The returned function ends it.
func startCPUProfile() func() {
	path := os.Getenv("VNET_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	path = strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid()))
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vnet: VNET_CPUPROFILE:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// exitError carries a status without a message of vnet's own (netperf
// failing a confidence target, for example).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

var stateDir string

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:               "vnet",
		Short:             "Virtual infrastructure networking for Linux hosts",
		SilenceUsage:      true,
		SilenceErrors:     true,
		Version:           versionLine(),
		PersistentPreRunE: refuseServerFlag,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().StringVar(&stateDir, "state-dir", defaultStateDir(), "where vnet keeps its state database")
	root.AddCommand(
		validateCmd(),
		applyCmd(),
		destroyCmd(),
		statusCmd(),
		execCmd(),
		linkCmd(),
		unlinkCmd(),
		pauseCmd(),
		resumeCmd(),
		graphCmd(),
		agentCmd(),
		gcCmd(),
		netperfCmd(),
		netserverCmd(),
		iocCmd(),
		labCmd(),
		recoverCmd(),
		serverCmd(),
		statsCmd(),
		versionCmd(),
		historyCmd(),
		diffCmd(),
		rollbackCmd(),
		getCmd(),
		describeCmd(),
		snapshotCmd(),
		restoreCmd(),
	)
	addClientFlags(root)
	addExamples(root, root.Name())
	examplesLast(root)
	return root
}

func defaultStateDir() string {
	if d := os.Getenv("VNET_STATE_DIR"); d != "" {
		return d
	}
	return "/var/lib/vnet"
}

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s: want %s", cmd.Name(), what)}
		}
		return nil
	}
}
