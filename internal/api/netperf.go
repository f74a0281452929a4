package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/netperf"
	"github.com/vnet-project/vnet/internal/spec"
)

// Bounds of netperf runs through the API: a run takes a VM's link for its
// whole length, so few run at once and none for long.
const (
	MaxNetperfRuns     = 2                // at once; a third is answered 429
	MaxNetperfLength   = 60 * time.Second // the longest run
	defaultNetperfLen  = 5 * time.Second
	keptNetperfRuns    = 100 // finished runs remembered, in memory
	maxNetperfBody     = 16 << 10
	netperfGrace       = 30 * time.Second // beyond the length: start-up and the result
	netperfStateRun    = "running"
	netperfStateDone   = "done"
	netperfStateFailed = "failed"
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

// netperfRuns keeps the runs of one server.
type netperfRuns struct {
	mu   sync.Mutex
	next int
	list []*NetperfRun // oldest first
}

func (nr *netperfRuns) running() []*NetperfRun {
	var out []*NetperfRun
	for _, r := range nr.list {
		if r.State == netperfStateRun {
			out = append(out, r)
		}
	}
	return out
}

// admit adds a run unless too many run, or one already uses either VM.
func (nr *netperfRuns) admit(run *NetperfRun) error {
	nr.mu.Lock()
	defer nr.mu.Unlock()
	busy := nr.running()
	for _, r := range busy {
		if r.Infra == run.Infra && (r.To == run.To || r.From == run.To || r.To == run.From || r.From == run.From) {
			return fail(http.StatusConflict, fmt.Sprintf("run %s measures %s and %s of %s now; one run at a time per VM (until %s)",
				r.ID, r.From, r.To, r.Infra, r.Started.Add(time.Duration(r.Length*float64(time.Second))).Format(time.TimeOnly)))
		}
	}
	if len(busy) >= MaxNetperfRuns {
		return fail(http.StatusTooManyRequests, fmt.Sprintf("%d netperf runs already run; try again when one ends", len(busy)))
	}
	nr.next++
	run.ID = strconv.Itoa(nr.next)
	nr.list = append(nr.list, run)
	if len(nr.list) > keptNetperfRuns {
		// Only finished runs go; running ones are at most MaxNetperfRuns.
		for i, r := range nr.list {
			if r.State != netperfStateRun {
				nr.list = append(nr.list[:i:i], nr.list[i+1:]...)
				break
			}
		}
	}
	return nil
}

func (nr *netperfRuns) get(id string) (NetperfRun, bool) {
	nr.mu.Lock()
	defer nr.mu.Unlock()
	for _, r := range nr.list {
		if r.ID == id {
			return *r, true
		}
	}
	return NetperfRun{}, false
}

func (nr *netperfRuns) newest(infra string) []NetperfRun {
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

func (nr *netperfRuns) finish(run *NetperfRun, rep *netperf.Report, err error) {
	nr.mu.Lock()
	defer nr.mu.Unlock()
	now := time.Now().UTC()
	run.Finished = &now
	switch {
	case err != nil:
		run.State, run.Error = netperfStateFailed, err.Error()
	case rep == nil || len(rep.Results) == 0:
		run.State, run.Error = netperfStateFailed, "netperf reported no result"
	default:
		run.State, run.Result = netperfStateDone, rep.Results[0]
		if len(rep.Results) > 1 {
			run.Aggregate = rep.Aggregate
		}
	}
}

var runID = regexp.MustCompile(`^[0-9]{1,9}$`)

// startNetperf checks a run's request against the applied spec, admits it
// and starts it; the answer (202) is the run as it starts.
func (s *Server) startNetperf(w http.ResponseWriter, r *http.Request, who string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	req, err := decodeNetperf(w, r)
	if err != nil {
		return err
	}
	rec, err := s.be.Get(name)
	if err != nil {
		return err
	}
	doc, err := storedDoc(rec)
	if err != nil {
		return err
	}
	run, err := planRun(doc.Spec, req)
	if err != nil {
		return err
	}
	run.Infra, run.Who, run.Started, run.State = name, who, time.Now().UTC(), netperfStateRun
	if err := s.runs.admit(run); err != nil {
		return err
	}
	snapshot := *run
	go s.runNetperf(run)
	w.Header().Set("Location", "/api/v1/netperf/"+snapshot.ID)
	writeJSON(w, http.StatusAccepted, snapshot)
	return nil
}

func (s *Server) runNetperf(run *NetperfRun) {
	ctx, cancel := context.WithTimeout(s.runsCtx, time.Duration(run.Length*float64(time.Second))+netperfGrace)
	defer cancel()
	rep, err := s.be.Netperf(ctx, run.Infra, run.From, run.To, run.Address, run.Args)
	s.runs.finish(run, rep, err)
	done, _ := s.runs.get(run.ID)
	ev := events.Event{Time: time.Now().UTC(), Action: events.Netperf, Infra: run.Infra, Who: run.Who, OK: done.State == netperfStateDone,
		Seconds: time.Since(run.Started).Seconds(), Error: done.Error, Port: run.To + "/" + run.VNIC, From: run.From, To: run.Address,
		Message: run.Test + " run " + run.ID + resultText(done.Result)}
	s.record(ev)
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

func decodeNetperf(w http.ResponseWriter, r *http.Request) (*NetperfRequest, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxNetperfBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", maxNetperfBody))
	case err != nil:
		return nil, fail(http.StatusBadRequest, "read the body: "+err.Error())
	}
	return DecodeNetperf(body)
}

// DecodeNetperf reads a run's request: JSON, no unknown fields.
func DecodeNetperf(body []byte) (*NetperfRequest, error) {
	var req NetperfRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, failField(http.StatusBadRequest, te.Field, "want a "+te.Type.String())
		}
		return nil, fail(http.StatusBadRequest, "the body is not a netperf request (JSON): "+err.Error())
	}
	if dec.More() {
		return nil, fail(http.StatusBadRequest, "the body holds more than one JSON value")
	}
	return &req, nil
}

// planRun resolves a request against the spec: the target's address, the
// sender, and vnet netperf's arguments, checked by its own parser.
func planRun(s *spec.Spec, req *NetperfRequest) (*NetperfRun, error) {
	test := req.Test
	if test == "" {
		test = netperf.TCPStream
	}
	if !contains(NetperfTests, test) {
		return nil, failField(http.StatusBadRequest, "test", fmt.Sprintf("%q: want one of %v", req.Test, NetperfTests))
	}
	length := req.Length
	if length == 0 {
		length = defaultNetperfLen.Seconds()
	}
	if length < 1 || length > MaxNetperfLength.Seconds() {
		return nil, failField(http.StatusBadRequest, "length", fmt.Sprintf("%g: want seconds from 1 to %g", req.Length, MaxNetperfLength.Seconds()))
	}
	vm, ok := s.VM(req.To)
	if req.To == "" || !ok {
		return nil, failField(http.StatusBadRequest, "to", fmt.Sprintf("%q: no VM of %s has that name", req.To, s.Name))
	}
	vnic, addr, pg, err := targetNIC(vm, req.VNIC)
	if err != nil {
		return nil, err
	}
	from := req.From
	if from == "" {
		if from = peerOn(s, pg, vm.Name); from == "" {
			return nil, failField(http.StatusBadRequest, "from", "no other VM has an address on port group "+pg+"; name the sender")
		}
	}
	if _, isVM := s.VM(from); !isVM {
		if _, isHost := s.Host(from); !isHost {
			return nil, failField(http.StatusBadRequest, "from", fmt.Sprintf("%q: no VM or host of %s has that name", from, s.Name))
		}
	}
	if from == vm.Name {
		return nil, failField(http.StatusBadRequest, "from", "the sender is the target: name another VM")
	}
	args := []string{"-H", addr, "-t", test, "-l", strconv.FormatFloat(length, 'f', -1, 64), "-P", "0", "--json"}
	o := req.Options
	if o.Instances < 0 || o.Instances > 4 {
		return nil, failField(http.StatusBadRequest, "options.instances", "want 1 to 4")
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
			return nil, failField(http.StatusBadRequest, opt.field, err.Error())
		}
		testArgs = append(testArgs, opt.flag, opt.val)
	}
	if o.RequestSize != 0 || o.ResponseSize != 0 {
		if o.RequestSize < 1 || o.ResponseSize < 1 {
			return nil, failField(http.StatusBadRequest, "options.request_size", "request_size and response_size go together, each at least 1")
		}
		testArgs = append(testArgs, "-r", fmt.Sprintf("%d,%d", o.RequestSize, o.ResponseSize))
	}
	if len(testArgs) > 0 {
		args = append(append(args, "--"), testArgs...)
	}
	if _, err := netperf.ParseArgs(args); err != nil {
		return nil, failField(http.StatusBadRequest, "options", err.Error())
	}
	return &NetperfRun{From: from, To: vm.Name, VNIC: vnic, Address: addr, Test: test, Length: length, Args: args}, nil
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
				return "", "", "", failField(http.StatusBadRequest, "vnic", vm.Name+" "+id+" has no address to test against")
			}
			continue
		}
		return id, p.Addr().String(), n.PortGroup, nil
	}
	if name != "" {
		return "", "", "", failField(http.StatusBadRequest, "vnic", fmt.Sprintf("%q: %s has no such vNIC (eth0 to eth%d)", name, vm.Name, len(vm.NICs)-1))
	}
	return "", "", "", failField(http.StatusBadRequest, "to", vm.Name+" has no vNIC with an address")
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (s *Server) getNetperf(w http.ResponseWriter, r *http.Request, _ string) error {
	id := r.PathValue("id")
	if !runID.MatchString(id) {
		return failField(http.StatusBadRequest, "id", "a run's id is a number")
	}
	run, ok := s.runs.get(id)
	if !ok {
		return fail(http.StatusNotFound, "no netperf run "+id+" (runs are kept in memory, the last "+strconv.Itoa(keptNetperfRuns)+")")
	}
	writeJSON(w, http.StatusOK, run)
	return nil
}

func (s *Server) listNetperf(w http.ResponseWriter, r *http.Request, _ string) error {
	infra := r.URL.Query().Get("infra")
	if infra != "" && (len(infra) > maxInfraName || !infraName.MatchString(infra)) {
		return failField(http.StatusBadRequest, "infra", "not an infrastructure name")
	}
	writeJSON(w, http.StatusOK, s.runs.newest(infra))
	return nil
}
