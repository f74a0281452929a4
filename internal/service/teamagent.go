package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/teamagent"
)

// The teaming agent of an infrastructure that teams uplinks runs beside it
// on this machine: an apply starts it or makes it reload, and a destroy
// stops it, each under the infrastructure's lock, so that an agent never
// outlives a destroy that raced an apply.

// syncAgent runs the infrastructure's agent when it teams uplinks, and
// stops it when it no longer does; it returns the log of an agent it
// started. Without Exe it leaves agents alone. The agent reads the spec
// from the store with a read-only open, which the lock does not block.
func (l *Local) syncAgent(s *spec.Spec) (started string, err error) {
	if l.Exe == "" {
		return "", nil
	}
	if len(plan.HostTeams(s)) == 0 {
		return "", teamagent.Stop(l.StateDir, s.Name)
	}
	ok, err := teamagent.Ensure(l.StateDir, s.Name, l.Exe)
	if err != nil || !ok {
		return "", err
	}
	return teamagent.LogFile(l.StateDir, s.Name), nil
}

// stopAgent stops the infrastructure's agent and removes its log.
func (l *Local) stopAgent(name string) error {
	if err := teamagent.Stop(l.StateDir, name); err != nil {
		return err
	}
	_ = os.Remove(teamagent.LogFile(l.StateDir, name))
	return nil
}

// agentStatus says whether the agent of an infrastructure that teams
// uplinks runs; nil for one that needs none.
func (l *Local) agentStatus(s *spec.Spec) *AgentStatus {
	if len(plan.HostTeams(s)) == 0 {
		return nil
	}
	pid, running := teamagent.Running(l.StateDir, s.Name)
	return &AgentStatus{Running: running, PID: pid, Log: teamagent.LogFile(l.StateDir, s.Name)}
}

// Agents are the teaming agents of the infrastructures that team uplinks.
func (l *Local) Agents() ([]AgentUp, error) {
	recs, err := l.records(nil, nil)
	if err != nil {
		return nil, err
	}
	var out []AgentUp
	for _, r := range recs {
		doc, err := l.docOf(r)
		if err != nil || len(plan.HostTeams(doc.Spec)) == 0 {
			continue
		}
		_, up := teamagent.Running(l.StateDir, r.Name)
		out = append(out, AgentUp{Infra: r.Name, Up: up})
	}
	return out, nil
}

// StopTeamAgent stops an infrastructure's teaming agent, wherever it was
// started.
func StopTeamAgent(stateDir, infra string) error { return teamagent.Stop(stateDir, infra) }

// TeamAgentOptions say how a teaming agent runs.
type TeamAgentOptions struct {
	StateDir, Infra string
	Tick            time.Duration // load sampling and link polling period
	Log             io.Writer
	// Reload makes the agent read the spec again (apply sends SIGHUP).
	// The caller sets it up before RunTeamAgent claims the agent's pid
	// file: whoever finds the pid there may signal it at once.
	Reload <-chan struct{}
}

// RunTeamAgent is the process of an infrastructure's teaming agent
// (`vnet agent run`): it claims the infrastructure's pid file and keeps
// the uplink teams right until ctx ends or the infrastructure is
// destroyed. Another agent holding the file ends it at once, without an
// error.
func RunTeamAgent(ctx context.Context, o TeamAgentOptions) error {
	dp, err := dataplane.New()
	if err != nil {
		return err
	}
	defer dp.Close()
	l := &Local{StateDir: o.StateDir, Cache: SpecCache(o.StateDir)}
	a := &teamagent.Agent{Infra: o.Infra, DP: dp, Log: o.Log, Tick: o.Tick,
		Spec: func() (*spec.Spec, error) {
			doc, err := l.doc(o.Infra)
			if err != nil {
				return nil, err
			}
			return doc.Spec, nil
		},
		Gone: func() bool {
			_, err := l.record(o.Infra)
			return errors.Is(err, ErrNotFound)
		},
		Event: func(ev events.Event) {
			if err := events.In(o.StateDir).Append(ev); err != nil {
				fmt.Fprintln(o.Log, err)
			}
		}}
	claim, err := teamagent.Take(o.StateDir, o.Infra)
	if errors.Is(err, teamagent.ErrRunning) {
		fmt.Fprintf(o.Log, "%v; this one exits\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	defer claim.Release()
	go func() {
		for range o.Reload {
			a.Reload()
		}
	}()
	ctx, lost := context.WithCancel(ctx)
	defer lost()
	go keepClaim(ctx, claim, o.Tick, o.Log, lost)
	return a.Run(ctx)
}

// keepClaim checks every tick that the agent still holds its pid file,
// claiming it anew should it have gone; an agent that finds another in its
// place ends.
func keepClaim(ctx context.Context, c *teamagent.Claim, tick time.Duration, log io.Writer, end func()) {
	t := time.NewTicker(max(tick, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.Keep(); err != nil {
				fmt.Fprintf(log, "%v; this one exits\n", err)
				end()
				return
			}
		}
	}
}
