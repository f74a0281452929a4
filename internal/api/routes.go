package api

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vnet-project/vnet/internal/api/web"
	"github.com/vnet-project/vnet/internal/quote"
)

// route is one operation of the API. Path is written as OpenAPI writes it,
// which is also how http.ServeMux reads it.
type route struct {
	Method  string
	Path    string
	Mutates bool // needs a token, and is logged and recorded as an event
	// Query is every query parameter the route takes (see checkQuery).
	Query  []param
	handle func(w http.ResponseWriter, r *http.Request, who string) error
}

func (s *Server) routeTable() []route {
	infra := param{Name: "infra", Kind: infraParam}
	window := func(def time.Duration) []param {
		return []param{durationBetween("window", min(def, s.cfg.History), time.Second, s.cfg.History)}
	}
	return []route{
		{Method: "GET", Path: "/", Query: []param{infra, {Name: "range", Kind: wordParam, Words: dashboardRanges}, {Name: "vm", Kind: nameParam}, generation("gen")}, handle: s.dashboard},
		{Method: "GET", Path: "/ui/{file}", handle: s.asset},
		{Method: "GET", Path: "/openapi.json", handle: s.openapi},
		{Method: "GET", Path: "/metrics", handle: s.metrics},
		{Method: "GET", Path: "/healthz", handle: s.healthz},
		{Method: "GET", Path: "/api/v1/infras", handle: s.listInfras},
		{Method: "GET", Path: "/api/v1/infras/{name}", handle: s.getInfra},
		{Method: "PUT", Path: "/api/v1/infras/{name}", Mutates: true, Query: []param{{Name: "dryRun", Kind: boolParam}, {Name: "dropAttached", Kind: boolParam}}, handle: s.putInfra},
		{Method: "DELETE", Path: "/api/v1/infras/{name}", Mutates: true, handle: s.deleteInfra},
		{Method: "GET", Path: "/api/v1/infras/{name}/status", handle: s.status},
		{Method: "GET", Path: "/api/v1/infras/{name}/ioc", Query: []param{durationBetween("interval", time.Second, 100*time.Millisecond, maxIOCInterval)}, handle: s.iocStats},
		{Method: "GET", Path: "/api/v1/infras/{name}/stats", Query: window(5 * time.Minute), handle: s.stats},
		{Method: "GET", Path: "/api/v1/infras/{name}/series", Query: append(window(2*time.Minute), param{Name: "points", Kind: intParam, Max: maxSeriesPoints}), handle: s.series},
		{Method: "GET", Path: "/api/v1/infras/{name}/graph", Query: []param{{Name: "format", Kind: wordParam, Words: graphFormatNames}, {Name: "v", Kind: nameParam}}, handle: s.graph},
		{Method: "POST", Path: "/api/v1/infras/{name}/pause", Mutates: true, handle: s.pause},
		{Method: "POST", Path: "/api/v1/infras/{name}/resume", Mutates: true, handle: s.resume},
		{Method: "POST", Path: "/api/v1/link", Mutates: true, handle: s.link},
		{Method: "POST", Path: "/api/v1/unlink", Mutates: true, handle: s.unlink},
		{Method: "GET", Path: "/api/v1/events", Query: []param{infra, {Name: "limit", Kind: intParam, Min: 1, Max: maxEvents, Default: 100}}, handle: s.listEvents},
		{Method: "POST", Path: "/api/v1/infras/{name}/netperf", Mutates: true, handle: s.startNetperf},
		{Method: "GET", Path: "/api/v1/netperf", Query: []param{infra}, handle: s.listNetperf},
		{Method: "GET", Path: "/api/v1/netperf/{id}", handle: s.getNetperf},
		{Method: "GET", Path: "/api/v1/infras/{name}/history", handle: s.history},
		{Method: "GET", Path: "/api/v1/infras/{name}/history/{generation}", handle: s.historyGeneration},
		{Method: "GET", Path: "/api/v1/history/retention", handle: s.getRetention},
		{Method: "PUT", Path: "/api/v1/history/retention", Mutates: true, handle: s.putRetention},
		{Method: "POST", Path: "/api/v1/infras/{name}/diff", Query: []param{generation("from"), generation("to"), {Name: "plan", Kind: boolParam}}, handle: s.diff},
		{Method: "POST", Path: "/api/v1/infras/{name}/rollback", Mutates: true, Query: []param{generation("to"), {Name: "dryRun", Kind: boolParam}, {Name: "dropAttached", Kind: boolParam}}, handle: s.rollback},
		{Method: "GET", Path: "/api/v1/infras/{name}/spec", handle: s.appliedSpec},
		{Method: "GET", Path: "/api/v1/infras/{name}/describe/{kind}/{object}", handle: s.describe},
		{Method: "GET", Path: "/api/v1/infras/{name}/snapshot", handle: s.snapshot},
		{Method: "POST", Path: "/api/v1/restore", Mutates: true, Query: []param{{Name: "dryRun", Kind: boolParam}}, handle: s.restore},
		// One VM of the spec in force, as a resource of its own.
		{Method: "GET", Path: "/api/v1/infras/{name}/vms/{vm}", handle: s.getVM},
		{Method: "PUT", Path: "/api/v1/infras/{name}/vms/{vm}", Mutates: true, Query: []param{{Name: "dryRun", Kind: boolParam}, {Name: "dropAttached", Kind: boolParam}}, handle: s.putVM},
		{Method: "DELETE", Path: "/api/v1/infras/{name}/vms/{vm}", Mutates: true, Query: []param{{Name: "dryRun", Kind: boolParam}, {Name: "dropAttached", Kind: boolParam}}, handle: s.deleteVM},
		// A runtime's containers and guests, one vNIC at a time (the CNI
		// plugin's ADD, DEL, CHECK and GC through a server).
		{Method: "POST", Path: "/api/v1/infras/{name}/attach", Mutates: true, handle: s.attach},
		{Method: "POST", Path: "/api/v1/infras/{name}/detach", Mutates: true, handle: s.detach},
		{Method: "POST", Path: "/api/v1/infras/{name}/attachment", handle: s.attachment},
		{Method: "POST", Path: "/api/v1/infras/{name}/collect", Mutates: true, handle: s.collect},
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
			writeError(w, fail(http.StatusMethodNotAllowed, quote.Q(r.Method)+" "+pathOf(r)+": method not allowed"))
			return
		}
		writeError(w, fail(http.StatusNotFound, pathOf(r)+": no such resource"))
	})
	return s.guard(mux)
}

// guard gives every answer the headers a browser needs (setSecurityHeaders),
// refuses a request addressed to a name that is not the server's
// (checkHost), and turns away paths meant to confuse routing before any
// route sees them: dot segments, empty segments, encoded slashes or dots,
// bytes that are not UTF-8 or are control characters.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		if err := s.checkHost(r); err != nil {
			s.refuse(r, "for a Host not the server's", "Host "+quote.Q(r.Host)+" is not the server's")
			writeError(w, err)
			return
		}
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

// wrap authorizes a route's requests, refuses a change from another
// site's page (checkOrigin) and a query the route does not take
// (checkQuery), logs changes and turns a handler's error into a JSON
// answer.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, ok := s.tokens.match(r)
		needToken := rt.Mutates || s.cfg.AuthReads || !loopback(r)
		if needToken && !ok {
			msg := "this request needs a bearer token (Authorization: Bearer TOKEN) from the server's token file"
			if s.tokens == nil {
				msg = "this server was started without a token file, so it takes no changes"
			}
			s.refuse(r, "without a valid token", "no valid token")
			writeError(w, fail(http.StatusUnauthorized, msg))
			return
		}
		if !ok {
			who = "anonymous"
		}
		if rt.Mutates {
			if err := checkOrigin(r); err != nil {
				s.refuse(r, "from another site's page", "Origin "+quote.Q(r.Header.Get("Origin"))+" is not the server")
				writeError(w, err)
				return
			}
		}
		r, err := checkQuery(rt, r)
		if err != nil {
			writeError(w, err)
			return
		}
		start := time.Now()
		if rt.Mutates && s.cfg.Trace != nil {
			r = r.WithContext(withStopwatch(r.Context(), s.cfg.Trace, start))
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		if err := rt.handle(rec, r, who); err != nil {
			writeError(rec, err)
		}
		if rt.Mutates {
			lap(r, "api: answered")
			// Milliseconds: a change takes a few of them.
			s.log.Printf("%s %s%s by %s from %s: %d in %.1f ms", r.Method, quote.Text(r.URL.Path), queryText(r), quote.Text(who), r.RemoteAddr, rec.status, float64(time.Since(start).Microseconds())/1000)
		}
	})
}

// refuse logs a refused request, within the log's bound (refusals);
// reason counts it once the bound is reached.
func (s *Server) refuse(r *http.Request, reason, why string) {
	s.refused.note(reason, fmt.Sprintf("refused %s %s from %s: %s", quote.Text(r.Method), quote.Text(r.URL.Path), r.RemoteAddr, why))
}

// pathOf is the request's path as error messages show it: quoted, escaped
// and clipped (quote.Q), since a client chose it. The log shows it
// escaped and clipped, without quotes (quote.Text).
func pathOf(r *http.Request) string { return quote.Q(r.URL.Path) }

// queryText is the request's query as the log shows it.
func queryText(r *http.Request) string {
	if r.URL.RawQuery == "" {
		return ""
	}
	return "?" + quote.Escape(quote.Clip(r.URL.RawQuery, quote.ClipBytes))
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
		return busy("the server is busy; try again")
	}
	defer func() { <-s.kernel }()
	return fn()
}

// dashboardRanges are the dashboard's time ranges (its page's choice of
// them), the default first: its address keeps the one chosen as ?range=,
// as it keeps ?vm=, for its script to read.
var dashboardRanges = []string{"2m", "1m", "5m", "15m", "30m", "1h"}

func (s *Server) dashboard(w http.ResponseWriter, r *http.Request, _ string) error {
	return serveAsset(w, r, "index.html")
}

func (s *Server) asset(w http.ResponseWriter, r *http.Request, _ string) error {
	name := r.PathValue("file")
	if name == "index.html" || name == "embed.go" {
		return fail(http.StatusNotFound, pathOf(r)+": no such resource")
	}
	return serveAsset(w, r, name)
}

func serveAsset(w http.ResponseWriter, r *http.Request, name string) error {
	data, err := fs.ReadFile(web.FS, name)
	if err != nil {
		return fail(http.StatusNotFound, pathOf(r)+": no such resource")
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
	w.Header().Set("Content-Security-Policy", dashboardCSP)
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
