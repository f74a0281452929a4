package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/units"
)

func (s *Server) listInfras(w http.ResponseWriter, r *http.Request, _ string) error {
	list, err := s.be.List(r.Context())
	if err != nil {
		return err
	}
	out := []InfraSummary{}
	for _, in := range list {
		out = append(out, summaryOf(in))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getInfra(w http.ResponseWriter, r *http.Request, _ string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	in, err := s.be.Get(r.Context(), name)
	if err != nil {
		return err
	}
	if wantsYAML(r.Header.Get("Accept")) {
		w.Header().Set("Content-Type", "application/yaml")
		_, err := w.Write(in.Spec)
		return err
	}
	writeJSON(w, http.StatusOK, Infra{summaryOf(*in), string(in.Spec)})
	return nil
}

func wantsYAML(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && isYAML(mt) {
			return true
		}
	}
	return false
}

func isYAML(mt string) bool {
	switch mt {
	case "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml":
		return true
	}
	return false
}

// SpecFileHeader names the file a PUT's spec came from, for status to
// show; without it the spec is "api:NAME".
const SpecFileHeader = "Vnet-Spec-File"

// decodeSpec reads a PUT's body as a spec: YAML or JSON by Content-Type,
// at most MaxBody bytes.
func (s *Server) decodeSpec(w http.ResponseWriter, r *http.Request, name string) (*spec.Document, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, fail(http.StatusUnsupportedMediaType, "Content-Type: want application/yaml or application/json")
	}
	json := mt == "application/json"
	if !json && !isYAML(mt) {
		return nil, fail(http.StatusUnsupportedMediaType, "Content-Type "+mt+": want application/yaml or application/json")
	}
	// A body announced as too large is refused before a byte of it is read.
	if r.ContentLength > s.cfg.MaxBody {
		return nil, s.bodyTooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, s.bodyTooLarge()
	case err != nil:
		return nil, fail(http.StatusBadRequest, "read the body: "+err.Error())
	}
	file := "api:" + name
	if f := r.Header.Get(SpecFileHeader); f != "" && len(f) <= 256 && !strings.ContainsFunc(f, func(r rune) bool { return r < 0x20 }) {
		file = f
	}
	select {
	case s.decoders <- struct{}{}:
	case <-r.Context().Done():
		return nil, fail(http.StatusServiceUnavailable, "the server is busy; try again")
	}
	defer func() { <-s.decoders }()
	return decodeBody(s.be.Load, file, body, json, name)
}

func (s *Server) bodyTooLarge() error {
	return fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %s (%d bytes), the largest spec the server takes",
		units.Size(s.cfg.MaxBody), s.cfg.MaxBody))
}

// DecodeSpec checks a request body as the spec of infrastructure name. JSON
// is read by the same decoder as YAML (JSON is YAML), once it is known to
// be JSON, so errors carry field paths and lines either way.
func DecodeSpec(file string, body []byte, isJSON bool, name string) (*spec.Document, error) {
	return decodeBody(spec.Load, file, body, isJSON, name)
}

// decodeBody is DecodeSpec, loading the spec with load (a back end's,
// through its cache of specs).
func decodeBody(load func(file string, src []byte) (*spec.Document, error), file string, body []byte, isJSON bool, name string) (*spec.Document, error) {
	if len(body) == 0 {
		return nil, fail(http.StatusBadRequest, "the body is empty: send the spec")
	}
	if isJSON {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			he := fail(http.StatusBadRequest, "the body is not JSON: "+err.Error())
			var se *json.SyntaxError
			if errors.As(err, &se) {
				he.body.Line = 1 + strings.Count(string(body[:min(int(se.Offset), len(body))]), "\n")
			}
			return nil, he
		}
	}
	doc, err := load(file, body)
	if err != nil {
		return nil, err
	}
	if doc.Spec.Name != name {
		pos := doc.PosOf("name")
		he := failField(http.StatusBadRequest, "name", fmt.Sprintf("the spec names %q but the URL %q", doc.Spec.Name, name))
		he.body.Line, he.body.Column = pos.Line, pos.Col
		return nil, he
	}
	return doc, nil
}

func (s *Server) putInfra(w http.ResponseWriter, r *http.Request, who string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	dryRun, err := boolParam(r, "dryRun")
	if err != nil {
		return err
	}
	start := time.Now()
	observe := func(result string) {
		s.applies.WithLabelValues(strconv.FormatBool(dryRun), result).Observe(time.Since(start).Seconds())
	}
	doc, err := s.decodeSpec(w, r, name)
	if err != nil {
		observe("invalid")
		return err
	}
	// Over etcd the answer lists what the hosts' agents will do.
	opts := service.ApplyOptions{DryRun: dryRun, Detail: true}
	if dryRun {
		var res *service.ApplyResult
		err := s.withKernel(r.Context(), func() (err error) { res, err = s.be.Apply(r.Context(), service.Source{Doc: doc}, opts); return })
		if err != nil {
			observe(result(err))
			return err
		}
		observe("ok")
		writeJSON(w, http.StatusOK, applyResult(res))
		return nil
	}
	opts.By = actor(r, who)
	res, err := s.be.Apply(r.Context(), service.Source{Doc: doc}, opts)
	observe(result(err))
	ev := Event{Time: time.Now().UTC(), Who: who, Remote: r.RemoteAddr, Action: events.Apply, Infra: name, OK: err == nil,
		Seconds: time.Since(start).Seconds()}
	if res != nil {
		ev.Changes = res.Executed
	}
	if err != nil {
		ev.Error = err.Error()
	}
	s.record(ev)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, applyResult(res))
	return nil
}

func applyResult(res *service.ApplyResult) ApplyResult {
	return ApplyResult{Infra: res.Infra, DryRun: res.DryRun, Changes: len(res.Plan), Executed: res.Executed, Plan: res.Plan,
		Hosts: res.Hosts, AgentStarted: res.AgentStarted, Warnings: res.Warnings}
}

func result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, spec.ErrInvalid):
		return "invalid"
	}
	return "failed"
}

func (s *Server) deleteInfra(w http.ResponseWriter, r *http.Request, who string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := s.be.Destroy(r.Context(), name, service.DestroyOptions{Detail: true, By: actor(r, who)})
	ev := Event{Time: time.Now().UTC(), Who: who, Remote: r.RemoteAddr, Action: events.Destroy, Infra: name, OK: err == nil,
		Seconds: time.Since(start).Seconds()}
	if res != nil {
		ev.Changes = res.Removed
	}
	if err != nil {
		ev.Error = err.Error()
	}
	s.record(ev)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, DestroyResult{Infra: name, Removed: res.Removed})
	return nil
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, _ string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	var st []*InfraStatus
	if err := s.withKernel(r.Context(), func() (err error) { st, err = s.be.Status(r.Context(), []string{name}); return }); err != nil {
		return err
	}
	if len(st) == 0 { // reported by hosts until a moment ago
		return fmt.Errorf("%q: %w", name, service.ErrNotFound)
	}
	writeJSON(w, http.StatusOK, st[0])
	return nil
}

// maxIOCInterval bounds how long one request may hold a turn at the kernel.
const maxIOCInterval = 10 * time.Second

func (s *Server) iocStats(w http.ResponseWriter, r *http.Request, _ string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	interval, err := durationParam(r, "interval", time.Second, 100*time.Millisecond, maxIOCInterval)
	if err != nil {
		return err
	}
	var st *service.IOCStats
	if err := s.withKernel(r.Context(), func() (err error) { st, err = s.be.IOCStats(r.Context(), name, interval); return }); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// window reads ?window= for stats and series: at most the history kept.
func (s *Server) window(r *http.Request, def time.Duration) (string, time.Duration, error) {
	name, err := nameOf(r)
	if err != nil {
		return "", 0, err
	}
	d, err := durationParam(r, "window", min(def, s.cfg.History), time.Second, s.cfg.History)
	return name, d, err
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request, _ string) error {
	name, d, err := s.window(r, 5*time.Minute)
	if err != nil {
		return err
	}
	avg, err := s.be.Stats(r.Context(), name, service.StatsOptions{Window: d})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, StatsResult{Window: d.Seconds(), Averages: avg})
	return nil
}

// series is each sampling step's rates over the window, what the dashboard
// draws: the sampler's history as it is, which only a server keeps.
func (s *Server) series(w http.ResponseWriter, r *http.Request, _ string) error {
	name, d, err := s.window(r, 2*time.Minute)
	if err != nil {
		return err
	}
	if _, err := s.be.Get(r.Context(), name); err != nil {
		return err
	}
	snaps, err := service.Samples(s.sampler, name, d)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, metrics.MakeSeries(snaps))
	return nil
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, _ string) error {
	infra := r.URL.Query().Get("infra")
	if infra != "" && (len(infra) > maxInfraName || !infraName.MatchString(infra)) {
		return failField(http.StatusBadRequest, "infra", "not an infrastructure name")
	}
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxEvents {
			return failField(http.StatusBadRequest, "limit", fmt.Sprintf("want a number from 1 to %d", maxEvents))
		}
		limit = n
	}
	evs, err := s.be.Events(r.Context(), infra, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, evs)
	return nil
}

// record keeps an event; a journal that cannot be written loses it, which
// the log says, and the change it describes stands.
func (s *Server) record(ev Event) {
	if err := s.be.Record(ev); err != nil {
		s.log.Printf("event %s %s: %v", ev.Action, ev.Infra, err)
	}
}

func boolParam(r *http.Request, key string) (bool, error) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, failField(http.StatusBadRequest, key, "want true or false")
	}
	return b, nil
}

func durationParam(r *http.Request, key string, def, lo, hi time.Duration) (time.Duration, error) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || d > hi {
		return 0, failField(http.StatusBadRequest, key, fmt.Sprintf("want a duration from %s to %s, like 30s or 5m", lo, hi))
	}
	return d, nil
}
