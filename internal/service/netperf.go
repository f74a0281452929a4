package service

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/netperf"
	"github.com/vnet-project/vnet/internal/spec"
)

// Bounds of netperf runs between VMs: a run takes a VM's link for its
// whole length, so few run at once and none for long.
const (
	MaxNetperfRuns     = 2                // at once; a third is ErrTooMany
	MaxNetperfLength   = 60 * time.Second // the longest run
	KeptNetperfRuns    = 100              // finished runs remembered, in memory
	defaultNetperfLen  = 5 * time.Second
	netperfGrace       = 30 * time.Second // beyond the length: start-up and the result
	NetperfRunning     = "running"
	NetperfDone        = "done"
	NetperfFailed      = "failed"
	maxNetperfInstance = 4
)

// NetperfTests are the tests a run may ask for.
var NetperfTests = []string{netperf.TCPStream, netperf.TCPMaerts, netperf.UDPStream, netperf.TCPRR, netperf.TCPCRR, netperf.UDPRR}

// NetperfRequest asks for one run of vnet netperf against a VM's vNIC.
type NetperfRequest struct {
	To      string         `json:"to"`             // the VM whose vNIC serves the test
	VNIC    string         `json:"vnic,omitempty"` // ethN; default its first with an address
	From    string         `json:"from,omitempty"` // a VM or host; default another VM on that vNIC's port group
	Test    string         `json:"test,omitempty"` // default TCP_STREAM
	Length  float64        `json:"length,omitempty"`
	Options NetperfOptions `json:"options,omitempty"`
}

// NetperfOptions are netperf's test options a run may set.
type NetperfOptions struct {
	SendSize     string `json:"send_size,omitempty"`     // -m, like 64K
	RecvSize     string `json:"recv_size,omitempty"`     // -M
	RequestSize  int    `json:"request_size,omitempty"`  // -r, RR tests
	ResponseSize int    `json:"response_size,omitempty"` // -r, RR tests
	Instances    int    `json:"instances,omitempty"`     // concurrent streams, 1 to 4
}

// NetperfRun is one run, running or finished.
type NetperfRun struct {
	ID       string          `json:"id"`
	Infra    string          `json:"infra"`
	State    string          `json:"state"` // running, done or failed
	Who      string          `json:"who"`
	From     string          `json:"from"`
	To       string          `json:"to"`
	VNIC     string          `json:"vnic"`
	Address  string          `json:"address"`
	Test     string          `json:"test"`
	Length   float64         `json:"length"`
	Args     []string        `json:"args"` // vnet netperf's arguments
	Started  time.Time       `json:"started"`
	Finished *time.Time      `json:"finished,omitempty"`
	Error    string          `json:"error,omitempty"`
	Result   *netperf.Result `json:"result,omitempty"`
	// Aggregate sums the instances of a run with more than one.
	Aggregate *netperf.Aggregate `json:"aggregate,omitempty"`
}

// RequestError is a request that is not valid, naming the field at fault;
// it is ErrInvalid to errors.Is.
type RequestError struct {
	Field, Msg string
}

func (e *RequestError) Error() string        { return e.Field + ": " + e.Msg }
func (e *RequestError) Is(target error) bool { return target == ErrInvalid }

func badField(field, msg string) error { return &RequestError{Field: field, Msg: msg} }

// NetperfRuns are the netperf runs between VMs a back end was asked for:
// at most MaxNetperfRuns at once and one per VM, the last KeptNetperfRuns
// kept in memory. Each run's end is recorded as an event.
type NetperfRuns struct {
	Backend Backend
	// Recorded is told of an event the back end could not keep; nil:
	// nothing is said.
	Recorded func(ev Event, err error)

	mu   sync.Mutex
	next int
	list []*NetperfRun // oldest first
}

// Start checks a run's request against the applied spec, admits it and
// starts it; parent bounds the run (a server's life, not the request's).
// It returns the run as it starts.
func (nr *NetperfRuns) Start(parent context.Context, infra, who string, req *NetperfRequest) (NetperfRun, error) {
	if !nr.Backend.ReadsKernel() {
		return NetperfRun{}, tagged{ErrNotHere, "a netperf run" + kernelsElsewhere}
	}
	doc, err := nr.Backend.Spec(parent, infra)
	if err != nil {
		return NetperfRun{}, err
	}
	run, err := PlanNetperf(doc.Spec, req)
	if err != nil {
		return NetperfRun{}, err
	}
	run.Infra, run.Who, run.Started, run.State = infra, who, time.Now().UTC(), NetperfRunning
	if err := nr.admit(run); err != nil {
		return NetperfRun{}, err
	}
	snapshot := *run
	go nr.run(parent, run)
	return snapshot, nil
}

func (nr *NetperfRuns) run(parent context.Context, run *NetperfRun) {
	ctx, cancel := context.WithTimeout(parent, time.Duration(run.Length*float64(time.Second))+netperfGrace)
	defer cancel()
	rep, err := nr.Backend.Netperf(ctx, run.Infra, run.From, run.To, run.Address, run.Args)
	nr.finish(run, rep, err)
	done, _ := nr.Get(run.ID)
	ev := events.Event{Time: time.Now().UTC(), Action: events.Netperf, Infra: run.Infra, Who: run.Who, OK: done.State == NetperfDone,
		Seconds: time.Since(run.Started).Seconds(), Error: done.Error, Port: run.To + "/" + run.VNIC, From: run.From, To: run.Address,
		Message: run.Test + " run " + run.ID + resultText(done.Result)}
	if err := nr.Backend.Record(ev); err != nil && nr.Recorded != nil {
		nr.Recorded(ev, err)
	}
}

func (nr *NetperfRuns) running() []*NetperfRun {
	var out []*NetperfRun
	for _, r := range nr.list {
		if r.State == NetperfRunning {
			out = append(out, r)
		}
	}
	return out
}

// admit adds a run unless too many run, or one already uses either VM.
func (nr *NetperfRuns) admit(run *NetperfRun) error {
	nr.mu.Lock()
	defer nr.mu.Unlock()
	busy := nr.running()
	for _, r := range busy {
		if r.Infra == run.Infra && (r.To == run.To || r.From == run.To || r.To == run.From || r.From == run.From) {
			return tagged{ErrBusy, fmt.Sprintf("run %s measures %s and %s of %s now; one run at a time per VM (until %s)",
				r.ID, r.From, r.To, r.Infra, r.Started.Add(time.Duration(r.Length*float64(time.Second))).Format(time.TimeOnly))}
		}
	}
	if len(busy) >= MaxNetperfRuns {
		return tagged{ErrTooMany, fmt.Sprintf("%d netperf runs already run; try again when one ends", len(busy))}
	}
	nr.next++
	run.ID = strconv.Itoa(nr.next)
	nr.list = append(nr.list, run)
	if len(nr.list) > KeptNetperfRuns {
		// Only finished runs go; running ones are at most MaxNetperfRuns.
		for i, r := range nr.list {
			if r.State != NetperfRunning {
				nr.list = append(nr.list[:i:i], nr.list[i+1:]...)
				break
			}
		}
	}
	return nil
}

// Get returns one run as it is now.
func (nr *NetperfRuns) Get(id string) (NetperfRun, bool) {
	nr.mu.Lock()
	defer nr.mu.Unlock()
	for _, r := range nr.list {
		if r.ID == id {
			return *r, true
		}
	}
	return NetperfRun{}, false
}

// Newest returns the runs of infra (all when empty), newest first.
func (nr *NetperfRuns) Newest(infra string) []NetperfRun {
	nr.mu.Lock()
	defer nr.mu.Unlock()
	out := []NetperfRun{}
	for i := len(nr.list) - 1; i >= 0; i-- {
		if infra == "" || nr.list[i].Infra == infra {
			out = append(out, *nr.list[i])
		}
	}
	return out
}

func (nr *NetperfRuns) finish(run *NetperfRun, rep *netperf.Report, err error) {
	nr.mu.Lock()
	defer nr.mu.Unlock()
	now := time.Now().UTC()
	run.Finished = &now
	switch {
	case err != nil:
		run.State, run.Error = NetperfFailed, err.Error()
	case rep == nil || len(rep.Results) == 0:
		run.State, run.Error = NetperfFailed, "netperf reported no result"
	default:
		run.State, run.Result = NetperfDone, rep.Results[0]
		if len(rep.Results) > 1 {
			run.Aggregate = rep.Aggregate
		}
	}
}

func resultText(r *netperf.Result) string {
	switch {
	case r == nil:
		return ""
	case r.Throughput > 0:
		return fmt.Sprintf(": %.1f Mbit/s", r.Throughput/1e6)
	case r.TransRate > 0:
		return fmt.Sprintf(": %.0f transactions/s", r.TransRate)
	}
	return ""
}

// PlanNetperf resolves a request against the spec: the target's address, the
// sender, and vnet netperf's arguments, checked by its own parser.
func PlanNetperf(s *spec.Spec, req *NetperfRequest) (*NetperfRun, error) {
	test := req.Test
	if test == "" {
		test = netperf.TCPStream
	}
	if !slices.Contains(NetperfTests, test) {
		return nil, badField("test", fmt.Sprintf("%q: want one of %v", req.Test, NetperfTests))
	}
	length := req.Length
	if length == 0 {
		length = defaultNetperfLen.Seconds()
	}
	if length < 1 || length > MaxNetperfLength.Seconds() {
		return nil, badField("length", fmt.Sprintf("%g: want seconds from 1 to %g", req.Length, MaxNetperfLength.Seconds()))
	}
	vm, ok := s.VM(req.To)
	if req.To == "" || !ok {
		return nil, badField("to", fmt.Sprintf("%q: no VM of %s has that name", req.To, s.Name))
	}
	vnic, addr, pg, err := targetNIC(vm, req.VNIC)
	if err != nil {
		return nil, err
	}
	from, err := sender(s, req.From, pg, vm.Name)
	if err != nil {
		return nil, err
	}
	args, err := netperfArgs(addr, test, length, req.Options)
	if err != nil {
		return nil, err
	}
	return &NetperfRun{From: from, To: vm.Name, VNIC: vnic, Address: addr, Test: test, Length: length, Args: args}, nil
}

// sender is the node that sends: the one named, or another VM with an
// address on the target's port group.
func sender(s *spec.Spec, from, pg, target string) (string, error) {
	if from == "" {
		if from = peerOn(s, pg, target); from == "" {
			return "", badField("from", "no other VM has an address on port group "+pg+"; name the sender")
		}
	}
	if _, isVM := s.VM(from); !isVM {
		if _, isHost := s.Host(from); !isHost {
			return "", badField("from", fmt.Sprintf("%q: no VM or host of %s has that name", from, s.Name))
		}
	}
	if from == target {
		return "", badField("from", "the sender is the target: name another VM")
	}
	return from, nil
}

// netperfArgs are vnet netperf's arguments for a run.
func netperfArgs(addr, test string, length float64, o NetperfOptions) ([]string, error) {
	args := []string{"-H", addr, "-t", test, "-l", strconv.FormatFloat(length, 'f', -1, 64), "-P", "0", "--json"}
	if o.Instances < 0 || o.Instances > maxNetperfInstance {
		return nil, badField("options.instances", "want 1 to 4")
	}
	if o.Instances > 1 {
		args = append(args, "--instances", strconv.Itoa(o.Instances))
	}
	var testArgs []string
	for _, opt := range []struct{ flag, field, val string }{{"-m", "options.send_size", o.SendSize}, {"-M", "options.recv_size", o.RecvSize}} {
		if opt.val == "" {
			continue
		}
		if _, err := netperf.ParseSize(opt.val); err != nil {
			return nil, badField(opt.field, err.Error())
		}
		testArgs = append(testArgs, opt.flag, opt.val)
	}
	if o.RequestSize != 0 || o.ResponseSize != 0 {
		if o.RequestSize < 1 || o.ResponseSize < 1 {
			return nil, badField("options.request_size", "request_size and response_size go together, each at least 1")
		}
		testArgs = append(testArgs, "-r", fmt.Sprintf("%d,%d", o.RequestSize, o.ResponseSize))
	}
	if len(testArgs) > 0 {
		args = append(append(args, "--"), testArgs...)
	}
	if _, err := netperf.ParseArgs(args); err != nil {
		return nil, badField("options", err.Error())
	}
	return args, nil
}

// targetNIC is the VM's vNIC that serves the test: the one named, or the
// first with an address.
func targetNIC(vm *spec.VM, name string) (vnic, addr, portgroup string, err error) {
	for i, n := range vm.NICs {
		id := fmt.Sprintf("eth%d", i)
		if name != "" && name != id {
			continue
		}
		p, perr := netip.ParsePrefix(n.IP)
		if perr != nil {
			if name != "" {
				return "", "", "", badField("vnic", vm.Name+" "+id+" has no address to test against")
			}
			continue
		}
		return id, p.Addr().String(), n.PortGroup, nil
	}
	if name != "" {
		return "", "", "", badField("vnic", fmt.Sprintf("%q: %s has no such vNIC (eth0 to eth%d)", name, vm.Name, len(vm.NICs)-1))
	}
	return "", "", "", badField("to", vm.Name+" has no vNIC with an address")
}

// peerOn is the first VM other than not with an address on port group pg.
func peerOn(s *spec.Spec, pg, not string) string {
	for _, vm := range s.VMs {
		if vm.Name == not {
			continue
		}
		for _, n := range vm.NICs {
			if n.PortGroup == pg && n.IP != "" {
				return vm.Name
			}
		}
	}
	return ""
}

// Netperf runs the engine of vnet netperf between two nodes, each end in
// its node's namespace and cgroup by vnet exec, as the lab does. The
// netserver listens on a port of its own for this run alone.
func (l *Local) Netperf(ctx context.Context, infra, from, to, addr string, args []string) (*netperf.Report, error) {
	if l.Exe == "" {
		return nil, fmt.Errorf("netperf: this server runs no vnet binary: %w", ErrNotHere)
	}
	port := strconv.Itoa(20000 + rand.IntN(20000))
	srv := exec.Command(l.Exe, "--state-dir", l.StateDir, "exec", infra+"/"+to, "--", l.Exe, "netserver", "-D", "-p", port, "-L", addr)
	// Both ends die with the server, should it die without ending them.
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := srv.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("netperf: start netserver in %s: %w", to, err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	if err := awaitListening(ctx, stderr); err != nil {
		return nil, fmt.Errorf("netperf: netserver in %s on %s:%s: %w", to, addr, port, err)
	}
	argv := append([]string{"--state-dir", l.StateDir, "exec", infra + "/" + from, "--", l.Exe, "netperf", "-p", port}, args...)
	cmd := exec.CommandContext(ctx, l.Exe, argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = strings.TrimSpace(string(out))
		}
		return nil, fmt.Errorf("netperf from %s: %v: %s", from, err, msg)
	}
	var rep netperf.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, fmt.Errorf("netperf from %s: unreadable result: %w", from, err)
	}
	return &rep, nil
}

// awaitListening reads the netserver's log until it listens, it ends, or
// ctx does; the rest of its log is drained so that it never blocks.
func awaitListening(ctx context.Context, log io.Reader) error {
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(log)
		var last string
		for sc.Scan() {
			last = sc.Text()
			if strings.Contains(last, "listening on") {
				ready <- nil
				_, _ = io.Copy(io.Discard, log)
				return
			}
		}
		ready <- fmt.Errorf("it ended: %s", last)
	}()
	select {
	case err := <-ready:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(15 * time.Second):
		return errors.New("not listening after 15 s")
	}
}
