package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/service"
)

// The operations after an apply: history, diff, rollback, the applied
// spec, describe, snapshot and restore. Each handler turns a request into
// one call of the back end, as the CLI's commands do.

func (s *Server) history(w http.ResponseWriter, r *http.Request, _ string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	h, err := s.be.History(r.Context(), name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h)
	return nil
}

func (s *Server) historyGeneration(w http.ResponseWriter, r *http.Request, _ string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	gen, err := generationParam(r.PathValue("generation"), "generation")
	if err != nil {
		return err
	}
	e, err := s.be.Generation(r.Context(), name, gen)
	if err != nil {
		return err
	}
	if wantsYAML(r.Header.Get("Accept")) {
		w.Header().Set("Content-Type", "application/yaml")
		_, err := w.Write(e.Spec)
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

// generationParam reads a generation: a number from 1.
func generationParam(v, field string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, failField(http.StatusBadRequest, field, "want a generation, a number from 1")
	}
	return n, nil
}

func (s *Server) getRetention(w http.ResponseWriter, r *http.Request, _ string) error {
	ret, err := s.be.HistoryRetention(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ret)
	return nil
}

func (s *Server) putRetention(w http.ResponseWriter, r *http.Request, _ string) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<10))
	if err != nil {
		return fail(http.StatusBadRequest, "read the body: "+err.Error())
	}
	var ret history.Retention
	if err := json.Unmarshal(body, &ret); err != nil {
		return failField(http.StatusBadRequest, "retention", err.Error())
	}
	if err := s.be.SetHistoryRetention(r.Context(), ret); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ret)
	return nil
}

// diff compares the spec in the body with the applied one, or with an
// empty body two generations (?from=, ?to=; the one in force when left
// out). It changes nothing, so it needs no token, as reads do. With
// ?plan=true it reads the kernel, in its turn.
func (s *Server) diff(w http.ResponseWriter, r *http.Request, _ string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	q := queryOf(r)
	req := service.DiffRequest{Plan: q.bool("plan"), From: q.int("from"), To: q.int("to")}
	if r.ContentLength != 0 {
		doc, done, err := s.decodeSpec(w, r, name)
		if err != nil {
			return err
		}
		defer done()
		req.Source = &service.Source{Doc: doc}
	}
	var res *service.DiffResult
	diff := func() (err error) { res, err = s.be.Diff(r.Context(), name, req); return }
	if req.Plan {
		// Only a plan reads the kernel; comparing specs waits for no turn.
		err = s.withKernel(r.Context(), diff)
	} else {
		err = diff()
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) rollback(w http.ResponseWriter, r *http.Request, who string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	var o service.RollbackOptions
	o.To, o.Apply.DryRun, o.DropAttached = queryOf(r).int("to"), queryOf(r).bool("dryRun"), queryOf(r).bool("dropAttached")
	o.Apply.Detail, o.Apply.By = true, actor(r, who)
	start := time.Now()
	res, err := s.be.Rollback(r.Context(), name, o)
	if !o.Apply.DryRun {
		changes := 0
		if res != nil && res.ApplyResult != nil {
			changes = res.Executed
		}
		s.recordChange(r, who, events.Rollback, name, start, changes, err)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) appliedSpec(w http.ResponseWriter, r *http.Request, _ string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	a, err := s.be.Applied(r.Context(), name)
	if err != nil {
		return err
	}
	if wantsYAML(r.Header.Get("Accept")) {
		w.Header().Set("Content-Type", "application/yaml")
		_, err := w.Write(a.Spec)
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) describe(w http.ResponseWriter, r *http.Request, _ string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	kind, err := service.DescribeKind(r.PathValue("kind"))
	if err != nil {
		return failField(http.StatusBadRequest, "kind", err.Error())
	}
	object := r.PathValue("object")
	if len(object) > 255 {
		return failField(http.StatusBadRequest, "object", "longer than any name a spec holds")
	}
	var d *service.Description
	if err := s.withKernel(r.Context(), func() (err error) { d, err = s.be.Describe(r.Context(), name, kind, object); return }); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request, _ string) error {
	name, err := nameOf(r)
	if err != nil {
		return err
	}
	snap, err := s.be.Snapshot(r.Context(), name)
	if err != nil {
		return err
	}
	if wantsYAML(r.Header.Get("Accept")) {
		y, err := snap.YAML()
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/yaml")
		_, err = w.Write(y)
		return err
	}
	writeJSON(w, http.StatusOK, snap)
	return nil
}

// restore makes the infrastructure of the snapshot in the body (YAML or
// JSON, as vnet snapshot writes it).
func (s *Server) restore(w http.ResponseWriter, r *http.Request, who string) error {
	dryRun := queryOf(r).bool("dryRun")
	tooLarge := func() error {
		return fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than a snapshot (%d bytes)", service.MaxSnapshotBytes))
	}
	if r.ContentLength > service.MaxSnapshotBytes {
		return tooLarge()
	}
	// Within the same budgets as a PUT's spec: a snapshot holds one.
	body, release, err := s.budgets.readBodyUpTo(w, r, service.MaxSnapshotBytes, tooLarge)
	if err != nil {
		return err
	}
	defer release()
	var snap *service.Snapshot
	err = s.budgets.decode(r.Context(), body, func() (err error) {
		if snap, err = service.ParseSnapshot(body); err != nil {
			return failField(http.StatusBadRequest, "snapshot", err.Error())
		}
		return nil
	})
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := s.be.Restore(r.Context(), snap, service.RestoreOptions{Apply: service.ApplyOptions{DryRun: dryRun, Detail: true, By: actor(r, who)}})
	if !dryRun {
		changes := 0
		if res != nil {
			changes = res.Executed
		}
		s.recordChange(r, who, events.Restore, snap.Infra, start, changes, err)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// actor is who makes a change through the API, for the history.
func actor(r *http.Request, who string) service.Actor {
	return service.Actor{Who: who, Via: history.API, Remote: r.RemoteAddr}
}

// recordChange keeps the event of a change made through the API.
func (s *Server) recordChange(r *http.Request, who, action, infra string, start time.Time, changes int, err error) {
	ev := Event{Time: time.Now().UTC(), Who: who, Remote: r.RemoteAddr, Action: action, Infra: infra, OK: err == nil,
		Seconds: time.Since(start).Seconds(), Changes: changes}
	if err != nil {
		ev.Error = err.Error()
	}
	s.record(ev)
}
