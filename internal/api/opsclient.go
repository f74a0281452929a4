package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/service"
)

func infraPath(name, rest string) string { return "/api/v1/infras/" + url.PathEscape(name) + rest }

// History lists an infrastructure's history.
func (c *Client) History(ctx context.Context, name string) (*service.HistoryResult, error) {
	var out service.HistoryResult
	return &out, c.do(ctx, "GET", infraPath(name, "/history"), nil, nil, &out)
}

// Generation is a generation's history entry, with its spec.
func (c *Client) Generation(ctx context.Context, name string, gen int) (*history.Entry, error) {
	var out history.Entry
	return &out, c.do(ctx, "GET", infraPath(name, "/history/"+strconv.Itoa(gen)), nil, nil, &out)
}

// Retention is how much history the server's store keeps.
func (c *Client) Retention(ctx context.Context) (history.Retention, error) {
	var out history.Retention
	return out, c.do(ctx, "GET", "/api/v1/history/retention", nil, nil, &out)
}

// SetRetention changes how much history the server's store keeps.
func (c *Client) SetRetention(ctx context.Context, r history.Retention) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return c.do(ctx, "PUT", "/api/v1/history/retention", body, http.Header{"Content-Type": {"application/json"}}, nil)
}

// Diff compares a spec's YAML (nil: generations from and to) with what
// the server applied.
func (c *Client) Diff(ctx context.Context, name string, from, to int, plan bool, file string, yaml []byte) (*service.DiffResult, error) {
	q := url.Values{}
	if from > 0 {
		q.Set("from", strconv.Itoa(from))
	}
	if to > 0 {
		q.Set("to", strconv.Itoa(to))
	}
	if plan {
		q.Set("plan", "true")
	}
	var h http.Header
	if yaml != nil {
		h = http.Header{"Content-Type": {"application/yaml"}}
		if file != "" {
			h.Set(SpecFileHeader, file)
		}
	}
	var out service.DiffResult
	return &out, c.do(ctx, "POST", infraPath(name, "/diff?"+q.Encode()), yaml, h, &out)
}

// Rollback applies an earlier generation (0: the one before) as a new one.
func (c *Client) Rollback(ctx context.Context, name string, o service.RollbackOptions) (*service.RollbackResult, error) {
	q := url.Values{}
	if o.To > 0 {
		q.Set("to", strconv.Itoa(o.To))
	}
	if o.Apply.DryRun {
		q.Set("dryRun", "true")
	}
	if o.DropAttached {
		q.Set("dropAttached", "true")
	}
	out := service.RollbackResult{ApplyResult: &service.ApplyResult{}}
	return &out, c.do(ctx, "POST", infraPath(name, "/rollback?"+q.Encode()), nil, nil, &out)
}

// Applied is the applied spec with its allocations pinned.
func (c *Client) Applied(ctx context.Context, name string) (*service.AppliedSpec, error) {
	var out service.AppliedSpec
	return &out, c.do(ctx, "GET", infraPath(name, "/spec"), nil, nil, &out)
}

// Describe shows one object.
func (c *Client) Describe(ctx context.Context, name, kind, object string) (*service.Description, error) {
	var out service.Description
	return &out, c.do(ctx, "GET", infraPath(name, "/describe/"+url.PathEscape(kind)+"/"+url.PathEscape(object)), nil, nil, &out)
}

// Snapshot takes an infrastructure's snapshot.
func (c *Client) Snapshot(ctx context.Context, name string) (*service.Snapshot, error) {
	var out service.Snapshot
	return &out, c.do(ctx, "GET", infraPath(name, "/snapshot"), nil, nil, &out)
}

// Restore sends a snapshot file for the server to restore.
func (c *Client) Restore(ctx context.Context, snapshot []byte, dryRun bool) (*service.ApplyResult, error) {
	path := "/api/v1/restore"
	if dryRun {
		path += "?dryRun=true"
	}
	var out service.ApplyResult
	return &out, c.do(ctx, "POST", path, snapshot, http.Header{"Content-Type": {"application/yaml"}}, &out)
}
