package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/quote"
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
// at most MaxBody bytes, within the server's budgets (budgets); done gives
// the body's share back once the request no longer needs it.
func (s *Server) decodeSpec(w http.ResponseWriter, r *http.Request, name string) (doc *spec.Document, done func(), err error) {
	done, err = s.decodeBody(w, r, name, func(file string, body []byte, isJSON bool) (err error) {
		doc, err = decodeBody(s.be.Load, file, body, isJSON, name)
		return err
	})
	return doc, done, err
}

// decodeBody reads a PUT's body, YAML or JSON by Content-Type, at most
// MaxBody bytes, and decodes it with decode within the server's budgets
// (budgets), naming it file: the Vnet-Spec-File header's, or "api:NAME".
// done gives the body's share back once the request no longer needs it.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, name string, decode func(file string, body []byte, isJSON bool) error) (done func(), err error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, fail(http.StatusUnsupportedMediaType, "Content-Type: want application/yaml or application/json")
	}
	json := mt == "application/json"
	if !json && !isYAML(mt) {
		return nil, fail(http.StatusUnsupportedMediaType, "Content-Type "+quote.Q(mt)+": want application/yaml or application/json")
	}
	// A body announced as too large is refused before a byte of it is read.
	if r.ContentLength > s.cfg.MaxBody {
		return nil, s.bodyTooLarge()
	}
	body, release, err := s.budgets.readBody(w, r, s.bodyTooLarge)
	if err != nil {
		return nil, err
	}
	file := bodyFile(r, name)
	err = s.budgets.decode(r.Context(), body, func() error { return decode(file, body, json) })
	if err != nil {
		release()
		return nil, err
	}
	lap(r, "api: body read and decoded")
	return release, nil
}

// bodyFile names the file a change's body came from (SpecFileHeader).
func bodyFile(r *http.Request, name string) string {
	if f := r.Header.Get(SpecFileHeader); f != "" && len(f) <= 256 && !strings.ContainsFunc(f, func(r rune) bool { return r < 0x20 }) {
		return f
	}
	return "api:" + name
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
		if err := checkJSON(body); err != nil {
			return nil, err
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

// checkJSON refuses a body that is not JSON, at the line where it stops
// being JSON.
func checkJSON(body []byte) error {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		he := fail(http.StatusBadRequest, "the body is not JSON: "+err.Error())
		var se *json.SyntaxError
		if errors.As(err, &se) {
			he.body.Line = 1 + strings.Count(string(body[:min(int(se.Offset), len(body))]), "\n")
		}
		return he
	}
	return nil
}

func (s *Server) putInfra(w http.ResponseWriter, r *http.Request, who string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	observe := s.observeApply(r, time.Now())
	doc, done, err := s.decodeSpec(w, r, name)
	if err != nil {
		observe("invalid")
		return err
	}
	defer done()
	return s.answerApply(w, r, who, observe, func(opts service.ApplyOptions) (*service.ApplyResult, error) {
		return s.be.Apply(r.Context(), service.Source{Doc: doc}, opts)
	})
}

// observeApply counts an apply the request asks for, begun at start, in
// the applies' metric, by result.
func (s *Server) observeApply(r *http.Request, start time.Time) func(result string) {
	dryRun := strconv.FormatBool(queryOf(r).bool("dryRun"))
	return func(result string) { s.applies.WithLabelValues(dryRun, result).Observe(time.Since(start).Seconds()) }
}

// answerApply runs apply with the options the request asks for, and
// answers with its result: a dry run takes a turn at the kernel, a change
// is made by who.
func (s *Server) answerApply(w http.ResponseWriter, r *http.Request, who string, observe func(result string),
	apply func(service.ApplyOptions) (*service.ApplyResult, error)) error {
	dryRun := queryOf(r).bool("dryRun")
	// Over etcd the answer lists what the hosts' agents will do.
	opts := service.ApplyOptions{DryRun: dryRun, Detail: true, DropAttached: queryOf(r).bool("dropAttached")}
	var res *service.ApplyResult
	var err error
	lap(r, "api: before the service")
	if dryRun {
		err = s.withKernel(r.Context(), func() (err error) { res, err = apply(opts); return })
	} else {
		opts.By = actor(r, who)
		res, err = apply(opts)
	}
	lap(r, "api: the service")
	observe(result(err))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, applyResult(res))
	lap(r, "api: the answer encoded")
	return nil
}

func applyResult(res *service.ApplyResult) ApplyResult {
	return ApplyResult{Infra: res.Infra, DryRun: res.DryRun, Changes: len(res.Plan), Executed: res.Executed, Plan: res.Plan,
		Hosts: res.Hosts, AgentStarted: res.AgentStarted, Warnings: res.Warnings, Attached: res.Attached}
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
	res, err := s.be.Destroy(r.Context(), name, service.DestroyOptions{Detail: true, By: actor(r, who)})
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
	interval := queryOf(r).duration("interval")
	var st *service.IOCStats
	if err := s.withKernel(r.Context(), func() (err error) { st, err = s.be.IOCStats(r.Context(), name, interval); return }); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request, _ string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	d := queryOf(r).duration("window")
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
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	q := queryOf(r)
	if _, err := s.be.Get(r.Context(), name); err != nil {
		return err
	}
	snaps, err := service.Samples(s.sampler, name, q.duration("window"))
	if err != nil {
		return err
	}
	series := metrics.MakeSeries(metrics.Thin(snaps, q.int("points")))
	writeJSON(w, http.StatusOK, SeriesResult{Series: series, History: s.cfg.History.Seconds()})
	return nil
}

// maxSeriesPoints bounds the steps a series may be thinned to: more than a
// screen is wide is no use to a chart.
const maxSeriesPoints = 10000

// SeriesResult is the series over the window, and how far back the server
// keeps samples: the longest window there is (the dashboard's choice of
// time range).
type SeriesResult struct {
	*metrics.Series
	History float64 `json:"history_seconds"`
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, _ string) error {
	q := queryOf(r)
	evs, err := s.be.Events(r.Context(), q.string("infra"), q.int("limit"))
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
