package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
)

// attachFake is the fake back end with attachments kept in memory, and
// every request as the server's back end was given it.
type attachFake struct {
	*fakeBackend
	mu       sync.Mutex
	attached map[service.AttachmentKey]service.AttachRequest
	asked    []service.AttachRequest
}

var _ service.Attacher = (*attachFake)(nil)

func (f *attachFake) Attach(_ context.Context, r service.AttachRequest) (*service.AttachResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, r)
	if r.Infra != "lab" {
		return nil, fmt.Errorf("infrastructure %q: %w", r.Infra, service.ErrNotFound)
	}
	if r.PortGroup == "" {
		return nil, service.Invalid("say which port group or network the vNIC is on")
	}
	k := service.AttachmentKey{Container: r.Container, Ifname: r.Ifname}
	_, existed := f.attached[k]
	f.attached[k] = r
	return &service.AttachResult{Infra: r.Infra, VM: service.ContainerVMName(r.Container, "", ""), Ifname: r.Ifname, Netns: r.Netns,
		MAC: "02:00:00:00:00:01", IPs: r.IPs, Existed: existed, Up: true}, nil
}

func (f *attachFake) Detach(_ context.Context, r service.DetachRequest) (*service.DetachResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := service.AttachmentKey{Container: r.Container, Ifname: r.Ifname}
	_, ok := f.attached[k]
	delete(f.attached, k)
	return &service.DetachResult{Infra: r.Infra, Removed: ok}, nil
}

func (f *attachFake) Attachment(_ context.Context, r service.DetachRequest) (*service.AttachResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.attached[service.AttachmentKey{Container: r.Container, Ifname: r.Ifname}]
	if !ok {
		return nil, fmt.Errorf("container %s has no vNIC %s: %w", r.Container, r.Ifname, service.ErrNotFound)
	}
	return &service.AttachResult{Infra: r.Infra, Ifname: a.Ifname, IPs: a.IPs, Up: true}, nil
}

func (f *attachFake) CollectAttachments(_ context.Context, r service.CollectRequest) (*service.CollectResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	keep := map[service.AttachmentKey]bool{}
	for _, k := range r.Keep {
		keep[k] = true
	}
	res := &service.CollectResult{}
	for k, a := range f.attached {
		if a.CNI == r.CNI && !keep[k] {
			delete(f.attached, k)
			res.Removed = append(res.Removed, service.DetachResult{Infra: r.Infra, Removed: true})
		}
	}
	return res, nil
}

// attachServer serves the fake over HTTP and returns it with a runtime's
// back end through the real client.
func attachServer(t *testing.T, tokenFile string) (*attachFake, service.AttachBackend, string) {
	t.Helper()
	fake := &attachFake{fakeBackend: newFake(), attached: map[service.AttachmentKey]service.AttachRequest{}}
	s, _ := newTestServer(t, func(c *Config) { c.Backend = fake })
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	if tokenFile == "" {
		tokenFile = filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte("cni:"+testToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	be, err := OpenAttachServer(AttachServer{URL: srv.URL, TokenFile: tokenFile})
	if err != nil {
		t.Fatal(err)
	}
	return fake, be, srv.URL
}

func TestAttachThroughServer(t *testing.T) {
	fake, be, _ := attachServer(t, "")
	ctx := context.Background()
	req := service.AttachRequest{Infra: "lab", Container: "c1", CNI: "net1", Netns: "cni-1", Ifname: "eth0", PortGroup: "web",
		IPs: []string{"10.0.0.5/24"}, MAC: "02:00:00:00:00:01", Wait: 90 * time.Second,
		Shaping: &spec.Shaping{Egress: &spec.Shaper{Average: 1e9, Burst: 1 << 20}}}
	a, err := be.Attach(ctx, req)
	if err != nil || a.Existed || a.Ifname != "eth0" || len(a.IPs) != 1 {
		t.Fatalf("attach: %+v, %v", a, err)
	}
	got := fake.asked[0]
	if !reflect.DeepEqual(got, req) {
		t.Errorf("the back end was asked\n %+v\nthe runtime asked\n %+v", got, req)
	}
	if a, err := be.Attach(ctx, req); err != nil || !a.Existed {
		t.Errorf("attach again: %+v, %v; want it as it is (existed)", a, err)
	}
	if a, err := be.Attachment(ctx, service.DetachRequest{Infra: "lab", Container: "c1", Ifname: "eth0"}); err != nil || !a.Up {
		t.Errorf("attachment: %+v, %v", a, err)
	}
	if _, err := be.Attachment(ctx, service.DetachRequest{Infra: "lab", Container: "c2", Ifname: "eth0"}); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("attachment of a container never added: %v, want ErrNotFound", err)
	}
	for i, want := range []bool{true, false} {
		d, err := be.Detach(ctx, service.DetachRequest{Infra: "lab", Container: "c1", Ifname: "eth0", Wait: time.Minute})
		if err != nil || d.Removed != want {
			t.Errorf("detach %d: %+v, %v; want removed %v", i+1, d, err, want)
		}
	}
	for _, c := range []string{"c3", "c4"} {
		if _, err := be.Attach(ctx, service.AttachRequest{Infra: "lab", Container: c, CNI: "net1", Netns: c, Ifname: "eth0", PortGroup: "web"}); err != nil {
			t.Fatal(err)
		}
	}
	col, err := be.CollectAttachments(ctx, service.CollectRequest{Infra: "lab", CNI: "net1", Keep: []service.AttachmentKey{{Container: "c3", Ifname: "eth0"}}})
	if err != nil || len(col.Removed) != 1 {
		t.Errorf("collect: %+v, %v; want c4 taken out", col, err)
	}
}

func TestAttachThroughServerRefuses(t *testing.T) {
	_, be, base := attachServer(t, "")
	ctx := context.Background()
	ok := service.AttachRequest{Infra: "lab", Container: "c1", Netns: "n", Ifname: "eth0", PortGroup: "web"}
	for _, c := range []struct {
		name string
		do   func() error
		want error
	}{
		{"an unknown infrastructure", func() error {
			r := ok
			r.Infra = "other"
			_, err := be.Attach(ctx, r)
			return err
		}, service.ErrNotFound},
		{"what the service refuses", func() error {
			r := ok
			r.PortGroup = ""
			_, err := be.Attach(ctx, r)
			return err
		}, service.ErrInvalid},
		{"a name that is no infrastructure's", func() error {
			r := ok
			r.Infra = "Not_A_Name"
			_, err := be.Attach(ctx, r)
			return err
		}, service.ErrInvalid},
		{"a detach without the vNIC's name", func() error {
			_, err := be.Detach(ctx, service.DetachRequest{Infra: "lab", Container: "c1"})
			return err
		}, service.ErrInvalid},
		{"a collect for no network", func() error {
			_, err := be.CollectAttachments(ctx, service.CollectRequest{Infra: "lab"})
			return err
		}, service.ErrInvalid},
	} {
		if err := c.do(); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	for _, c := range []struct{ name, body, token string }{
		{"a field the body has no place for", `{"container": "c1", "netns": "n", "ifname": "eth0", "portgroup": "web", "stateDir": "/tmp"}`, testToken},
		{"a wait longer than the server's", `{"container": "c1", "netns": "n", "ifname": "eth0", "portgroup": "web", "wait": "1h"}`, testToken},
		{"a wait that is no duration", `{"container": "c1", "netns": "n", "ifname": "eth0", "portgroup": "web", "wait": "soon"}`, testToken},
		{"no token", `{"container": "c1", "netns": "n", "ifname": "eth0", "portgroup": "web"}`, ""},
		{"a body larger than an attachment", `{"container": "` + strings.Repeat("c", maxAttachBody) + `"}`, testToken},
	} {
		rq, _ := http.NewRequest("POST", base+"/api/v1/infras/lab/attach", strings.NewReader(c.body))
		if c.token != "" {
			rq.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Errorf("%s: %d, want a refusal", c.name, resp.StatusCode)
		}
	}
}

// Every call through a server that is not there says so with its address
// (ErrNoServer), not as Go's HTTP client words a refused connection.
func TestClientServerOutOfReach(t *testing.T) {
	addr := freeAddr(t)
	c, err := NewClient("http://"+addr, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(context.Background(), "lab")
	if !errors.Is(err, service.ErrNoServer) || !strings.HasPrefix(err.Error(), "vnet server http://"+addr+": cannot be reached") {
		t.Errorf("get through a server that is not there: %v, want ErrNoServer naming %s first", err, addr)
	}
}

// A server that does not answer is an error that says so (ErrNoServer),
// never a fall back to this machine's store.
func TestAttachServerOutOfReach(t *testing.T) {
	addr := freeAddr(t)
	be, err := OpenAttachServer(AttachServer{URL: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = be.Attach(context.Background(), service.AttachRequest{Infra: "lab", Container: "c1", Netns: "n", Ifname: "eth0", PortGroup: "web"})
	if !errors.Is(err, service.ErrNoServer) || !strings.Contains(err.Error(), addr) {
		t.Errorf("attach through a server that is not there: %v, want ErrNoServer naming %s", err, addr)
	}
	if strings.Count(err.Error(), "cannot be reached") != 1 {
		t.Errorf("attach through a server that is not there: %v says it once", err)
	}
	for _, s := range []AttachServer{{URL: "unix:///run/vnet.sock"}, {URL: "http://127.0.0.1:1", TokenFile: "/nonexistent/token"}, {URL: "https://127.0.0.1:1", CA: "/nonexistent/ca.pem"}} {
		if _, err := OpenAttachServer(s); err == nil {
			t.Errorf("%+v: opened, want an error", s)
		}
	}
}
