package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/units"
)

// AttachBody is the body of an attach: a container's (or a guest's) vNIC,
// as service.AttachRequest has it. The server runs on the machine the
// container runs on, so names here are that machine's: Netns is a name in
// its /run/netns (never a path), Tap a link on it. Nothing in the body is
// a file the server opens or a command it runs; the spec's checks of a
// VM's names apply before anything changes.
type AttachBody struct {
	Host         string       `json:"host,omitempty"`
	Container    string       `json:"container"`
	PodNamespace string       `json:"podNamespace,omitempty"`
	PodName      string       `json:"podName,omitempty"`
	CNI          string       `json:"cni,omitempty"`
	Netns        string       `json:"netns,omitempty"`
	Ifname       string       `json:"ifname,omitempty"`
	Tap          string       `json:"tap,omitempty"`
	Guest        string       `json:"guest,omitempty"`
	PortGroup    string       `json:"portgroup,omitempty"`
	Network      string       `json:"network,omitempty"`
	MAC          string       `json:"mac,omitempty"`
	IPs          []string     `json:"ips,omitempty"`
	Allocate     bool         `json:"allocate,omitempty"`
	Shaping      *ShapingBody `json:"shaping,omitempty"`
	// Wait bounds the wait for the infrastructure's lock (a duration such
	// as "90s", at most maxAttachWait); "" is the service's default.
	Wait string `json:"wait,omitempty"`
}

// ShapingBody is a vNIC's own shaper: rates in bit/s, bursts in bytes.
type ShapingBody struct {
	Ingress *ShaperBody `json:"ingress,omitempty"`
	Egress  *ShaperBody `json:"egress,omitempty"`
}

// ShaperBody is one direction's token bucket.
type ShaperBody struct {
	Average uint64 `json:"average"`
	Peak    uint64 `json:"peak,omitempty"`
	Burst   uint64 `json:"burst"`
}

// DetachBody names a container's vNIC: for a detach, a check of it, and,
// with Keep, a collection of what a CNI network no longer uses.
type DetachBody struct {
	Container string `json:"container,omitempty"`
	Ifname    string `json:"ifname,omitempty"`
	CNI       string `json:"cni,omitempty"`
	Wait      string `json:"wait,omitempty"`
}

// CollectBody is the body of a collect: the CNI network and the vNICs it
// still uses.
type CollectBody struct {
	CNI  string                  `json:"cni"`
	Keep []service.AttachmentKey `json:"keep"`
	Wait string                  `json:"wait,omitempty"`
}

// maxAttachBody bounds an attach's body: names and a few addresses.
const maxAttachBody = 16 << 10

// maxCollectBody bounds a collect's body: a node's containers, each an ID
// and a name.
const maxCollectBody = 4 << 20

// maxAttachWait bounds how long a request may wait for the
// infrastructure's lock: within the server's write timeout.
const maxAttachWait = 5 * time.Minute

// attacher is the server's back end as an Attacher: every back end the
// server is given is one.
func (s *Server) attacher() (service.Attacher, error) {
	a, ok := s.be.(service.Attacher)
	if !ok {
		return nil, fmt.Errorf("attachments: %w", service.ErrNotHere)
	}
	return a, nil
}

func (s *Server) attach(w http.ResponseWriter, r *http.Request, _ string) error {
	var b AttachBody
	if err := smallJSON(w, r, maxAttachBody, "an attachment", `want {"container": ID, "netns": NAME, "ifname": NAME, "portgroup": NAME, ...}`, false, &b); err != nil {
		return err
	}
	req, err := b.request()
	if err != nil {
		return err
	}
	return s.attaching(w, r, func(ctx context.Context, a service.Attacher, infra string) (any, error) {
		req.Infra = infra
		return a.Attach(ctx, req)
	})
}

func (s *Server) detach(w http.ResponseWriter, r *http.Request, _ string) error {
	b, wait, err := detachBody(w, r)
	if err != nil {
		return err
	}
	return s.attaching(w, r, func(ctx context.Context, a service.Attacher, infra string) (any, error) {
		return a.Detach(ctx, service.DetachRequest{Infra: infra, Container: b.Container, Ifname: b.Ifname, CNI: b.CNI, Wait: wait})
	})
}

func (s *Server) attachment(w http.ResponseWriter, r *http.Request, _ string) error {
	b, _, err := detachBody(w, r)
	if err != nil {
		return err
	}
	return s.attaching(w, r, func(ctx context.Context, a service.Attacher, infra string) (any, error) {
		return a.Attachment(ctx, service.DetachRequest{Infra: infra, Container: b.Container, Ifname: b.Ifname, CNI: b.CNI})
	})
}

func (s *Server) collect(w http.ResponseWriter, r *http.Request, _ string) error {
	var b CollectBody
	if err := smallJSON(w, r, maxCollectBody, "a collection", `want {"cni": NAME, "keep": [{"container": ID, "ifname": NAME}, ...]}`, false, &b); err != nil {
		return err
	}
	if b.CNI == "" {
		return failField(http.StatusBadRequest, "cni", "missing: the CNI network whose vNICs to collect")
	}
	wait, err := attachWait(b.Wait)
	if err != nil {
		return err
	}
	return s.attaching(w, r, func(ctx context.Context, a service.Attacher, infra string) (any, error) {
		return a.CollectAttachments(ctx, service.CollectRequest{Infra: infra, CNI: b.CNI, Keep: b.Keep, Wait: wait})
	})
}

// attaching runs one of the Attacher's calls on the request's
// infrastructure, in a turn at the kernel, and answers its result.
func (s *Server) attaching(w http.ResponseWriter, r *http.Request, call func(context.Context, service.Attacher, string) (any, error)) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	a, err := s.attacher()
	if err != nil {
		return err
	}
	var res any
	err = s.withKernel(r.Context(), func() (err error) {
		res, err = call(r.Context(), a, name)
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// detachBody reads a detach's (or a check's) body: the container and the
// vNIC's name, both needed.
func detachBody(w http.ResponseWriter, r *http.Request) (DetachBody, time.Duration, error) {
	var b DetachBody
	want := `want {"container": ID, "ifname": NAME, "cni": NAME}`
	if err := smallJSON(w, r, maxAttachBody, "a vNIC's name", want, false, &b); err != nil {
		return b, 0, err
	}
	switch {
	case b.Container == "":
		return b, 0, failField(http.StatusBadRequest, "container", "missing: "+want)
	case b.Ifname == "":
		return b, 0, failField(http.StatusBadRequest, "ifname", "missing: "+want)
	}
	wait, err := attachWait(b.Wait)
	return b, wait, err
}

// attachWait reads a body's wait.
func attachWait(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > maxAttachWait {
		return 0, failField(http.StatusBadRequest, "wait", fmt.Sprintf("%q: want a duration such as 90s, at most %s", s, maxAttachWait))
	}
	return d, nil
}

// request is the body as the service's request (without the
// infrastructure, which the path names).
func (b AttachBody) request() (service.AttachRequest, error) {
	wait, err := attachWait(b.Wait)
	if err != nil {
		return service.AttachRequest{}, err
	}
	return service.AttachRequest{Host: b.Host, Container: b.Container, PodNamespace: b.PodNamespace, PodName: b.PodName,
		CNI: b.CNI, Netns: b.Netns, Ifname: b.Ifname, Tap: b.Tap, Guest: b.Guest, PortGroup: b.PortGroup, Network: b.Network,
		MAC: b.MAC, IPs: b.IPs, Allocate: b.Allocate, Shaping: b.Shaping.shaping(), Wait: wait}, nil
}

// attachBodyOf is a request as a body.
func attachBodyOf(r service.AttachRequest) AttachBody {
	b := AttachBody{Host: r.Host, Container: r.Container, PodNamespace: r.PodNamespace, PodName: r.PodName,
		CNI: r.CNI, Netns: r.Netns, Ifname: r.Ifname, Tap: r.Tap, Guest: r.Guest, PortGroup: r.PortGroup, Network: r.Network,
		MAC: r.MAC, IPs: r.IPs, Allocate: r.Allocate, Shaping: shapingBodyOf(r.Shaping), Wait: waitText(r.Wait)}
	return b
}

func waitText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return min(d, maxAttachWait).String()
}

func (b *ShapingBody) shaping() *spec.Shaping {
	if b == nil || b.Ingress == nil && b.Egress == nil {
		return nil
	}
	return &spec.Shaping{Ingress: b.Ingress.shaper(), Egress: b.Egress.shaper()}
}

func (b *ShaperBody) shaper() *spec.Shaper {
	if b == nil {
		return nil
	}
	return &spec.Shaper{Average: units.Rate(b.Average), Peak: units.Rate(b.Peak), Burst: units.Size(b.Burst)}
}

func shapingBodyOf(s *spec.Shaping) *ShapingBody {
	if s == nil {
		return nil
	}
	return &ShapingBody{Ingress: shaperBodyOf(s.Ingress), Egress: shaperBodyOf(s.Egress)}
}

func shaperBodyOf(s *spec.Shaper) *ShaperBody {
	if s == nil {
		return nil
	}
	return &ShaperBody{Average: uint64(s.Average), Peak: uint64(s.Peak), Burst: uint64(s.Burst)}
}
