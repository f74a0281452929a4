package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/vnet-project/vnet/internal/service"
)

// LinkTarget is the body of a link or unlink: the vNIC (VM and eth0,
// eth1, ...), for a link the port group it goes to, and the
// infrastructure, which may be left out when one applied infrastructure
// has a VM of that name.
type LinkTarget struct {
	Infra     string `json:"infra,omitempty"`
	VM        string `json:"vm"`
	NIC       string `json:"nic"`
	PortGroup string `json:"portgroup,omitempty"`
}

// LinkResult is what a link or unlink changed.
type LinkResult = service.LinkResult

// maxLinkBody bounds a link's body: four names.
const maxLinkBody = 4 << 10

func (s *Server) link(w http.ResponseWriter, r *http.Request, who string) error {
	return s.linking(w, r, who, true)
}

func (s *Server) unlink(w http.ResponseWriter, r *http.Request, who string) error {
	return s.linking(w, r, who, false)
}

// linking is link or unlink through the service's one Link, as the
// command line's.
func (s *Server) linking(w http.ResponseWriter, r *http.Request, who string, connected bool) error {
	t, err := linkTarget(w, r, connected)
	if err != nil {
		return err
	}
	var res *service.LinkResult
	err = s.withKernel(r.Context(), func() (err error) {
		res, err = s.be.Link(r.Context(), service.LinkRequest{Infra: t.Infra, VM: t.VM, NIC: t.NIC, PortGroup: t.PortGroup,
			Connected: connected, By: actor(r, who)})
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// linkTarget reads a link's body: JSON with the vNIC and, for a link, the
// port group, no other field.
func linkTarget(w http.ResponseWriter, r *http.Request, connected bool) (LinkTarget, error) {
	var t LinkTarget
	want := `want {"infra": NAME, "vm": NAME, "nic": "ethN", "portgroup": NAME} (infra may be left out)`
	if !connected {
		want = `want {"infra": NAME, "vm": NAME, "nic": "ethN"} (infra may be left out)`
	}
	if err := smallJSON(w, r, maxLinkBody, "a link's target", want, false, &t); err != nil {
		return t, err
	}
	switch {
	case t.Infra != "" && (len(t.Infra) > maxInfraName || !infraName.MatchString(t.Infra)):
		return t, failField(http.StatusBadRequest, "infra", "not an infrastructure name (lowercase letters, digits and -, at most 20)")
	case t.VM == "":
		return t, failField(http.StatusBadRequest, "vm", "missing: "+want)
	case t.NIC == "":
		return t, failField(http.StatusBadRequest, "nic", "missing: "+want)
	case connected && t.PortGroup == "":
		return t, failField(http.StatusBadRequest, "portgroup", "missing: "+want)
	case !connected && t.PortGroup != "":
		return t, failField(http.StatusBadRequest, "portgroup", "an unlink keeps the vNIC's port group: leave it out")
	}
	return t, nil
}

// Link asks the server to connect a VM's vNIC to a port group.
func (c *Client) Link(ctx context.Context, t LinkTarget) (*LinkResult, error) {
	return c.linking(ctx, "link", t)
}

// Unlink asks the server to disconnect a VM's vNIC.
func (c *Client) Unlink(ctx context.Context, t LinkTarget) (*LinkResult, error) {
	return c.linking(ctx, "unlink", t)
}

func (c *Client) linking(ctx context.Context, verb string, t LinkTarget) (*LinkResult, error) {
	body, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	var out LinkResult
	return &out, c.do(ctx, "POST", "/api/v1/"+verb, body, http.Header{"Content-Type": {"application/json"}}, &out)
}

// Link asks the server to link or unlink.
func (r *Remote) Link(ctx context.Context, req service.LinkRequest) (*service.LinkResult, error) {
	if req.Wait > 0 {
		return nil, errWaitNeedsEtcd
	}
	t := LinkTarget{Infra: req.Infra, VM: req.VM, NIC: req.NIC, PortGroup: req.PortGroup}
	do := r.C.Unlink
	if req.Connected {
		do = r.C.Link
	}
	res, err := do(ctx, t)
	if err == nil && req.Log != nil {
		// The plan goes to Log as a link's on this machine would.
		io.WriteString(req.Log, service.PlanText(res.Plan))
	}
	return res, err
}
