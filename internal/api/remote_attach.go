package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/vnet-project/vnet/internal/service"
)

var _ service.AttachBackend = (*Remote)(nil)

// AttachServer is how a runtime's face reaches a vnet server: its URL, a
// file holding the bearer token its changes need, and for HTTPS a file
// with the CA of the server's certificate ("" trusts the system's).
type AttachServer struct {
	URL, TokenFile, CA string
}

// attachTimeout bounds one call of a runtime's face: the longest wait a
// request may ask for, and a margin.
const attachTimeout = maxAttachWait + time.Minute

// OpenAttachServer is the attachments of the server s names, through its
// API: what the CNI plugin uses when its configuration names a server, so
// that each ADD is a request to a process that keeps the infrastructure's
// spec, model and kernel handles, rather than a new process reading them.
func OpenAttachServer(s AttachServer) (service.AttachBackend, error) {
	token := ""
	if s.TokenFile != "" {
		t, err := FirstToken(s.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("server token file %s: %w", s.TokenFile, err)
		}
		token = t
	}
	c, err := NewClient(s.URL, token)
	if err != nil {
		return nil, service.Invalid(err.Error())
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // the server is on this machine: no proxy between
	if s.CA != "" {
		pem, err := os.ReadFile(s.CA)
		if err != nil {
			return nil, fmt.Errorf("server CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, service.Invalid(fmt.Sprintf("server CA %s holds no PEM certificate", s.CA))
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c.HTTP = &http.Client{Transport: tr, Timeout: attachTimeout}
	return &Remote{C: c}, nil
}

// Attach asks the server to attach the vNIC.
func (r *Remote) Attach(ctx context.Context, req service.AttachRequest) (*service.AttachResult, error) {
	var out service.AttachResult
	return &out, r.attachCall(ctx, req.Infra, "attach", attachBodyOf(req), &out)
}

// Detach asks the server to take the vNIC out.
func (r *Remote) Detach(ctx context.Context, req service.DetachRequest) (*service.DetachResult, error) {
	var out service.DetachResult
	return &out, r.attachCall(ctx, req.Infra, "detach", DetachBody{Container: req.Container, Ifname: req.Ifname, CNI: req.CNI, Wait: waitText(req.Wait)}, &out)
}

// Attachment asks the server for the vNIC as applied and in its kernel.
func (r *Remote) Attachment(ctx context.Context, req service.DetachRequest) (*service.AttachResult, error) {
	var out service.AttachResult
	return &out, r.attachCall(ctx, req.Infra, "attachment", DetachBody{Container: req.Container, Ifname: req.Ifname, CNI: req.CNI}, &out)
}

// CollectAttachments asks the server to take out what the CNI network
// attached and no longer uses.
func (r *Remote) CollectAttachments(ctx context.Context, req service.CollectRequest) (*service.CollectResult, error) {
	var out service.CollectResult
	return &out, r.attachCall(ctx, req.Infra, "collect", CollectBody{CNI: req.CNI, Keep: req.Keep, Wait: waitText(req.Wait)}, &out)
}

// attachCall posts body to the infrastructure's verb. An error that is
// not the server's answer is a server out of reach (ErrNoServer).
func (r *Remote) attachCall(ctx context.Context, infra, verb string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	err = r.C.do(ctx, "POST", "/api/v1/infras/"+url.PathEscape(infra)+"/"+verb, data, http.Header{"Content-Type": {"application/json"}}, out)
	return reached(r.C, err)
}

// reached marks an error that is not the server's answer as the server
// being out of reach.
func reached(c *Client, err error) error {
	var answer *Error
	if err == nil || errors.As(err, &answer) || errors.Is(err, service.ErrNoServer) {
		return err
	}
	return c.outOfReach(errors.New(strings.TrimPrefix(err.Error(), "vnet server: ")))
}
