package api

import (
	"context"
	"io/fs"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vnet-project/vnet/internal/api/web"
)

// route is one operation of the API. Path is written as OpenAPI writes it,
// which is also how http.ServeMux reads it.
type route struct {
	Method  string
	Path    string
	Mutates bool // needs a token, and is logged and recorded as an event
	handle  func(w http.ResponseWriter, r *http.Request, who string) error
}

func (s *Server) routeTable() []route {
	return []route{
		{Method: "GET", Path: "/", handle: s.dashboard},
		{Method: "GET", Path: "/ui/{file}", handle: s.asset},
		{Method: "GET", Path: "/openapi.json", handle: s.openapi},
		{Method: "GET", Path: "/metrics", handle: s.metrics},
		{Method: "GET", Path: "/healthz", handle: s.healthz},
		{Method: "GET", Path: "/api/v1/infras", handle: s.listInfras},
		{Method: "GET", Path: "/api/v1/infras/{name}", handle: s.getInfra},
		{Method: "PUT", Path: "/api/v1/infras/{name}", Mutates: true, handle: s.putInfra},
		{Method: "DELETE", Path: "/api/v1/infras/{name}", Mutates: true, handle: s.deleteInfra},
		{Method: "GET", Path: "/api/v1/infras/{name}/status", handle: s.status},
		{Method: "GET", Path: "/api/v1/infras/{name}/ioc", handle: s.iocStats},
		{Method: "GET", Path: "/api/v1/infras/{name}/stats", handle: s.stats},
		{Method: "GET", Path: "/api/v1/infras/{name}/series", handle: s.series},
		{Method: "GET", Path: "/api/v1/events", handle: s.listEvents},
		{Method: "POST", Path: "/api/v1/infras/{name}/netperf", Mutates: true, handle: s.startNetperf},
		{Method: "GET", Path: "/api/v1/netperf", handle: s.listNetperf},
		{Method: "GET", Path: "/api/v1/netperf/{id}", handle: s.getNetperf},
		{Method: "GET", Path: "/api/v1/infras/{name}/history", handle: s.history},
		{Method: "GET", Path: "/api/v1/infras/{name}/history/{generation}", handle: s.historyGeneration},
		{Method: "GET", Path: "/api/v1/history/retention", handle: s.getRetention},
		{Method: "PUT", Path: "/api/v1/history/retention", Mutates: true, handle: s.putRetention},
		{Method: "POST", Path: "/api/v1/infras/{name}/diff", handle: s.diff},
		{Method: "POST", Path: "/api/v1/infras/{name}/rollback", Mutates: true, handle: s.rollback},
		{Method: "GET", Path: "/api/v1/infras/{name}/spec", handle: s.appliedSpec},
		{Method: "GET", Path: "/api/v1/infras/{name}/describe/{kind}/{object}", handle: s.describe},
		{Method: "GET", Path: "/api/v1/infras/{name}/snapshot", handle: s.snapshot},
		{Method: "POST", Path: "/api/v1/restore", Mutates: true, handle: s.restore},
	}
}

// muxPattern is the route as http.ServeMux reads it: "/" alone is the
// dashboard, not every path.
func (rt route) muxPattern() string {
	if rt.Path == "/" {
		return rt.Method + " /{$}"
	}
	return rt.Method + " " + rt.Path
}

func (s *Server) buildHandler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes {
		mux.Handle(rt.muxPattern(), s.wrap(rt))
	}
	known := http.NewServeMux()
	for _, rt := range s.routes {
		known.Handle(rt.muxPattern(), http.NotFoundHandler())
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// What no route matched: a path no route has (404), or one that
		// another method has (405, with the methods it takes).
		var allow []string
		for _, m := range []string{"GET", "PUT", "POST", "DELETE"} {
			r2 := r.Clone(r.Context())
			r2.Method = m
			if _, pat := known.Handler(r2); pat != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, fail(http.StatusMethodNotAllowed, r.Method+" "+r.URL.Path+": method not allowed"))
			return
		}
		writeError(w, fail(http.StatusNotFound, r.URL.Path+": no such resource"))
	})
	return s.guard(mux)
}

// guard turns away paths meant to confuse routing before any route sees
// them: dot segments, empty segments, encoded slashes or dots, bytes that
// are not UTF-8 or are control characters.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := badPath(r.URL); msg != "" {
			writeError(w, fail(http.StatusBadRequest, msg))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func badPath(u *url.URL) string {
	p := u.Path
	if !strings.HasPrefix(p, "/") {
		return "the path must start with /"
	}
	if !utf8.ValidString(p) || strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return "the path holds characters no resource has"
	}
	raw := strings.ToLower(u.EscapedPath())
	if strings.Contains(raw, "%2f") || strings.Contains(raw, "%2e") || strings.Contains(raw, "%5c") {
		return "the path holds encoded slashes or dots"
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "." || seg == ".." {
			return "the path holds . or .. segments"
		}
	}
	if strings.Contains(p, "//") {
		return "the path holds an empty segment"
	}
	return ""
}

// wrap authorizes a route's requests, logs changes and turns a handler's
// error into a JSON answer.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, ok := s.tokens.match(r)
		needToken := rt.Mutates || s.cfg.AuthReads || !loopback(r)
		if needToken && !ok {
			msg := "this request needs a bearer token (Authorization: Bearer TOKEN) from the server's token file"
			if s.tokens == nil {
				msg = "this server was started without a token file, so it takes no changes"
			}
			if rt.Mutates {
				s.log.Printf("refused %s %s from %s: no valid token", r.Method, r.URL.Path, r.RemoteAddr)
			}
			writeError(w, fail(http.StatusUnauthorized, msg))
			return
		}
		if !ok {
			who = "anonymous"
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		if err := rt.handle(rec, r, who); err != nil {
			writeError(rec, err)
		}
		if rt.Mutates {
			s.log.Printf("%s %s%s by %s from %s: %d in %.2fs", r.Method, r.URL.Path, query(r), who, r.RemoteAddr, rec.status, time.Since(start).Seconds())
		}
	})
}

func query(r *http.Request) string {
	if r.URL.RawQuery == "" {
		return ""
	}
	return "?" + r.URL.RawQuery
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Flush lets streaming answers (the metrics) through the recorder.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// infraName is how infrastructures are named (the spec's rule for name).
var infraName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

const maxInfraName = 20

// nameOf is the {name} of a request, checked.
func nameOf(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if len(name) > maxInfraName || !infraName.MatchString(name) {
		return "", failField(http.StatusBadRequest, "name", "not an infrastructure name (lowercase letters, digits and -, at most 20)")
	}
	return name, nil
}

// withKernel runs fn once a turn to read the kernel is free.
func (s *Server) withKernel(ctx context.Context, fn func() error) error {
	select {
	case s.kernel <- struct{}{}:
	case <-ctx.Done():
		return fail(http.StatusServiceUnavailable, "the server is busy; try again")
	}
	defer func() { <-s.kernel }()
	return fn()
}

func (s *Server) dashboard(w http.ResponseWriter, r *http.Request, _ string) error {
	return serveAsset(w, r, "index.html")
}

func (s *Server) asset(w http.ResponseWriter, r *http.Request, _ string) error {
	name := r.PathValue("file")
	if name == "index.html" || name == "embed.go" {
		return fail(http.StatusNotFound, r.URL.Path+": no such resource")
	}
	return serveAsset(w, r, name)
}

func serveAsset(w http.ResponseWriter, r *http.Request, name string) error {
	data, err := fs.ReadFile(web.FS, name)
	if err != nil {
		return fail(http.StatusNotFound, r.URL.Path+": no such resource")
	}
	types := map[string]string{".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
		".css": "text/css; charset=utf-8"}
	ct := "text/plain; charset=utf-8"
	for ext, t := range types {
		if strings.HasSuffix(name, ext) {
			ct = t
		}
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'")
	_, err = w.Write(data)
	return err
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request, _ string) error {
	return s.withKernel(r.Context(), func() error {
		s.metricsHandler().ServeHTTP(w, r)
		return nil
	})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ string) error {
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}
