package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/vnet-project/vnet/internal/service"
)

// PauseTarget is the body of a pause or resume: at most one of VM, Network
// and PortGroup; none (or no body) is the whole infrastructure, and for a
// resume everything paused.
type PauseTarget struct {
	VM        string `json:"vm,omitempty"`
	Network   string `json:"network,omitempty"`
	PortGroup string `json:"portgroup,omitempty"`
}

// PauseResult is what a pause or resume did.
type PauseResult = service.PauseResult

// maxPauseBody bounds a pause's body: three names.
const maxPauseBody = 4 << 10

func (s *Server) pause(w http.ResponseWriter, r *http.Request, who string) error {
	return s.pausing(w, r, who, s.be.Pause)
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request, who string) error {
	return s.pausing(w, r, who, s.be.Resume)
}

func (s *Server) pausing(w http.ResponseWriter, r *http.Request, who string,
	do func(context.Context, service.PauseRequest) (*service.PauseResult, error)) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	t, err := pauseTarget(w, r)
	if err != nil {
		return err
	}
	var res *service.PauseResult
	err = s.withKernel(r.Context(), func() (err error) {
		res, err = do(r.Context(), service.PauseRequest{Infra: name, VM: t.VM, Network: t.Network, PortGroup: t.PortGroup,
			By: actor(r, who)})
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// pauseTarget reads a pause's body: JSON naming at most one target, no
// other field; an empty body names none.
func pauseTarget(w http.ResponseWriter, r *http.Request) (PauseTarget, error) {
	var t PauseTarget
	err := smallJSON(w, r, maxPauseBody, "a pause's target", `want {"vm": NAME}, {"network": NAME}, {"portgroup": NAME} or nothing`, true, &t)
	return t, err
}

// smallJSON reads a small JSON body into v: at most max bytes, one
// document, no field v lacks; an empty one leaves v as it is when
// emptyOK. what names the body in an error, want says what it should be.
func smallJSON(w http.ResponseWriter, r *http.Request, max int64, what, want string, emptyOK bool, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return fail(http.StatusRequestEntityTooLarge, "the body is larger than "+what)
	case err != nil:
		return fail(http.StatusBadRequest, "read the body: "+err.Error())
	case emptyOK && len(bytes.TrimSpace(body)) == 0:
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.More() {
		return fail(http.StatusBadRequest, "the body: "+want)
	}
	return nil
}

// Pause asks the server to pause an infrastructure, or a VM, network or
// port group of it.
func (c *Client) Pause(ctx context.Context, name string, t PauseTarget) (*PauseResult, error) {
	return c.pausing(ctx, "pause", name, t)
}

// Resume asks the server to resume what Pause paused.
func (c *Client) Resume(ctx context.Context, name string, t PauseTarget) (*PauseResult, error) {
	return c.pausing(ctx, "resume", name, t)
}

func (c *Client) pausing(ctx context.Context, verb, name string, t PauseTarget) (*PauseResult, error) {
	body, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	var out PauseResult
	return &out, c.do(ctx, "POST", "/api/v1/infras/"+url.PathEscape(name)+"/"+verb, body,
		http.Header{"Content-Type": {"application/json"}}, &out)
}

// Pause asks the server to pause.
func (r *Remote) Pause(ctx context.Context, req service.PauseRequest) (*service.PauseResult, error) {
	if req.Wait > 0 {
		return nil, errWaitNeedsEtcd
	}
	return r.C.Pause(ctx, req.Infra, PauseTarget{VM: req.VM, Network: req.Network, PortGroup: req.PortGroup})
}

// Resume asks the server to resume.
func (r *Remote) Resume(ctx context.Context, req service.PauseRequest) (*service.PauseResult, error) {
	if req.Wait > 0 {
		return nil, errWaitNeedsEtcd
	}
	return r.C.Resume(ctx, req.Infra, PauseTarget{VM: req.VM, Network: req.Network, PortGroup: req.PortGroup})
}
