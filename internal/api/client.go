package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vnet-project/vnet/internal/service"
)

// Client talks to a vnet API server.
type Client struct {
	Base  string // e.g. http://127.0.0.1:8470
	Token string
	HTTP  *http.Client
}

// NewClient checks the server's URL.
func NewClient(base, token string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q: want a URL like http://127.0.0.1:8470", base)
	}
	return &Client{Base: strings.TrimSuffix(base, "/"), Token: token, HTTP: &http.Client{Timeout: 15 * time.Minute}}, nil
}

// Error is an error the server answered.
type Error struct {
	Status int
	Body   ErrorBody
}

func (e *Error) Error() string {
	return e.Body.Error
}

// Unwrap lets callers tell bad input, a spec or a request (the CLI's exit
// status 2), a rollback or an apply refused for the VMs runtimes attached
// (exit 2 too) and an unknown infrastructure from other failures, by the
// service's sentinels.
func (e *Error) Unwrap() error {
	switch {
	case e.Status == http.StatusNotFound:
		return service.ErrNotFound
	case e.Status == http.StatusBadRequest:
		return service.ErrInvalid
	case e.Status == http.StatusConflict && len(e.Body.Attached) > 0:
		return service.ErrAttached
	case e.Status == http.StatusConflict:
		return service.ErrConflict
	case e.Status == http.StatusServiceUnavailable:
		return unavailableCause(e.Body.Code)
	}
	return nil
}

// unavailableCause is the sentinel of a 503's reason. A busy server, and
// one that gives no reason (an older one, which meant a held store or an
// etcd out of reach), come back as ErrLocked: trying again later may
// succeed.
func unavailableCause(code string) error {
	switch code {
	case CodeUnavailable:
		return service.ErrUnavailable
	case CodeNoSamples:
		return service.ErrNoSamples
	}
	return service.ErrLocked
}

// transportError says what went wrong before the server answered. A
// connection that could not be made is the server out of reach
// (ErrNoServer), said with its address rather than as Go's HTTP client
// words it.
func (c *Client) transportError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return c.outOfReach(op)
	}
	return fmt.Errorf("vnet server: %w", err)
}

// outOfReach is the server out of reach (ErrNoServer), for why.
func (c *Client) outOfReach(why error) error {
	return fmt.Errorf("vnet server %s: %w: %v", c.Base, service.ErrNoServer, why)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, header http.Header, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return c.transportError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("vnet server: %w", err)
	}
	if resp.StatusCode >= 300 {
		e := &Error{Status: resp.StatusCode}
		if json.Unmarshal(data, &e.Body) != nil || e.Body.Error == "" {
			e.Body.Error = fmt.Sprintf("vnet server: %s", resp.Status)
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("vnet server: %s %s: %w", method, path, err)
	}
	return nil
}

// List returns every infrastructure.
func (c *Client) List(ctx context.Context) ([]InfraSummary, error) {
	var out []InfraSummary
	return out, c.do(ctx, "GET", "/api/v1/infras", nil, nil, &out)
}

// Get returns an infrastructure with its spec as applied.
func (c *Client) Get(ctx context.Context, name string) (*Infra, error) {
	var out Infra
	return &out, c.do(ctx, "GET", "/api/v1/infras/"+url.PathEscape(name), nil, nil, &out)
}

// Apply sends a spec's YAML; with dryRun the server only plans.
func (c *Client) Apply(ctx context.Context, name, file string, yaml []byte, dryRun bool) (*ApplyResult, error) {
	return c.ApplyWith(ctx, name, file, yaml, service.ApplyOptions{DryRun: dryRun})
}

// ApplyWith is Apply as o says: a dry run, and whether to drop the VMs
// runtimes attached that the spec has no place for.
func (c *Client) ApplyWith(ctx context.Context, name, file string, yaml []byte, o service.ApplyOptions) (*ApplyResult, error) {
	h := http.Header{"Content-Type": {"application/yaml"}}
	if file != "" {
		h.Set(SpecFileHeader, file)
	}
	q := applyQuery(o)
	var out ApplyResult
	path := "/api/v1/infras/" + url.PathEscape(name)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return &out, c.do(ctx, "PUT", path, yaml, h, &out)
}

// PutVM writes one VM's entry (YAML) into the infrastructure's spec in
// force, creating or replacing VM vm, and applies that as ApplyWith
// applies a spec.
func (c *Client) PutVM(ctx context.Context, name, vm string, yaml []byte, o service.ApplyOptions) (*ApplyResult, error) {
	var out ApplyResult
	return &out, c.do(ctx, "PUT", vmPath(name, vm, o), yaml, http.Header{"Content-Type": {"application/yaml"}}, &out)
}

// DeleteVM takes VM vm out of the infrastructure's spec in force and
// applies that.
func (c *Client) DeleteVM(ctx context.Context, name, vm string, o service.ApplyOptions) (*ApplyResult, error) {
	var out ApplyResult
	return &out, c.do(ctx, "DELETE", vmPath(name, vm, o), nil, nil, &out)
}

// vmPath is the address of one VM of an infrastructure, with the query o
// asks for.
func vmPath(name, vm string, o service.ApplyOptions) string {
	path := "/api/v1/infras/" + url.PathEscape(name) + "/vms/" + url.PathEscape(vm)
	if q := applyQuery(o); len(q) > 0 {
		path += "?" + q.Encode()
	}
	return path
}

// applyQuery is the query of a change o asks for.
func applyQuery(o service.ApplyOptions) url.Values {
	q := url.Values{}
	if o.DryRun {
		q.Set("dryRun", "true")
	}
	if o.DropAttached {
		q.Set("dropAttached", "true")
	}
	return q
}

// Destroy removes an infrastructure.
func (c *Client) Destroy(ctx context.Context, name string) (*DestroyResult, error) {
	var out DestroyResult
	return &out, c.do(ctx, "DELETE", "/api/v1/infras/"+url.PathEscape(name), nil, nil, &out)
}

// Status observes an infrastructure.
func (c *Client) Status(ctx context.Context, name string) (*InfraStatus, error) {
	out := InfraStatus{Infra: &service.Status{}}
	return &out, c.do(ctx, "GET", "/api/v1/infras/"+url.PathEscape(name)+"/status", nil, nil, &out)
}

// Stats returns rates averaged over the window from the server's samples.
func (c *Client) Stats(ctx context.Context, name string, window time.Duration) (*StatsResult, error) {
	var out StatsResult
	return &out, c.do(ctx, "GET", "/api/v1/infras/"+url.PathEscape(name)+"/stats?window="+window.String(), nil, nil, &out)
}

// IOC samples Network I/O Control's counters over interval.
func (c *Client) IOC(ctx context.Context, name string, interval time.Duration) (*service.IOCStats, error) {
	var out service.IOCStats
	return &out, c.do(ctx, "GET", "/api/v1/infras/"+url.PathEscape(name)+"/ioc?interval="+interval.String(), nil, nil, &out)
}

// Events returns up to limit events of infra (all when empty), newest first.
func (c *Client) Events(ctx context.Context, infra string, limit int) ([]Event, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if infra != "" {
		q.Set("infra", infra)
	}
	var out []Event
	return out, c.do(ctx, "GET", "/api/v1/events?"+q.Encode(), nil, nil, &out)
}
