package hostagent

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"sync"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/teamagent"
)

// A switch that teams several real uplinks on this host needs what the
// lab's teaming agent does there (package teamagent): follow the devices'
// carrier, sample their load for LBT, move team-wide limit splits. The host
// agent runs that same agent, one per infrastructure that teams here, in
// its own process, scoped to the host's part of the spec
// (plan.Options.Host): it starts one after an apply that leaves teams on
// the host, tells it to read the spec again after each apply, and stops it
// before the infrastructure's part is removed.

// teamRun is the teaming agent of one infrastructure.
type teamRun struct {
	agent  *teamagent.Agent
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	spec  *spec.Spec
	scope plan.Options
}

func (t *teamRun) current() (*spec.Spec, plan.Options) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.spec, t.scope
}

// hostScope is the part of the spec this host realizes, as the planner's
// options: with the speeds of the real NICs whose spec gives none, read
// from the devices as an apply reads them.
func (a *Agent) hostScope(doc *spec.Document) (plan.Options, error) {
	opt := plan.Options{Host: a.Host, HostNS: a.HostNS}
	hf, ok := a.DP.(reconcile.HostFactReader)
	if !ok {
		return opt, nil
	}
	// Only the real NICs' speeds matter here; the apply checked the VMs'
	// TAPs and namespaces, of which a host may have thousands.
	links, namespaces := plan.HostNames(doc.Spec, a.Host, plan.NoVMs)
	if len(links) == 0 && len(namespaces) == 0 {
		return opt, nil
	}
	ns := a.HostNS
	if ns == "" {
		ns = plan.CurrentNS
	}
	underlay := ""
	if h, ok := doc.Spec.Host(a.Host); ok {
		underlay = h.Underlay
	}
	facts, err := hf.HostFacts(ns, links, namespaces, underlay)
	if err != nil {
		return opt, err
	}
	// The line rates must be the apply's: the agent's model of the pool
	// classes is compared with what the apply made of them.
	opt.DeviceSpeeds, err = plan.CheckHostFacts(doc, a.Host, facts, plan.NoVMs)
	return opt, err
}

// uplinksDown are the host's teamed uplinks without carrier now, which an
// apply keeps ports off (reconcile.Engine.UplinksDown).
func (a *Agent) uplinksDown(s *spec.Spec) map[string]bool {
	if a.TeamDP == nil {
		return nil
	}
	teams, _ := plan.Teaming(s, plan.Options{Host: a.Host, HostNS: a.HostNS})
	states := map[string]map[string]status.Link{}
	for _, t := range teams {
		if _, ok := states[t.NS]; ok {
			continue
		}
		st, err := a.TeamDP.LinkStates(t.NS)
		if err != nil {
			return nil
		}
		states[t.NS] = st
	}
	return teamagent.DownUplinks(teams, states)
}

// syncTeaming runs the infrastructure's teaming agent when its host part
// teams uplinks or shares a pool's limit over several, with the spec just
// applied, and stops it when it no longer does. A running one reads the
// spec and the kernel again when the spec changed or the apply changed
// the host (executed).
func (a *Agent) syncTeaming(ctx context.Context, doc *spec.Document, executed bool) {
	if a.TeamDP == nil {
		return
	}
	name := doc.Spec.Name
	scope, err := a.hostScope(doc)
	if err != nil {
		a.logf("%s: teaming: read host %s: %v; the teaming agent keeps what it had\n", name, a.Host, err)
		return
	}
	teams, limits := plan.Teaming(doc.Spec, scope)
	if len(teams) == 0 && len(limits) == 0 {
		a.stopTeaming(name)
		return
	}
	if t, ok := a.teaming[name]; ok {
		t.mu.Lock()
		same := reflect.DeepEqual(t.spec, doc.Spec) && reflect.DeepEqual(t.scope, scope)
		t.spec, t.scope = doc.Spec, scope
		t.mu.Unlock()
		if !same || executed {
			t.agent.Reload()
		}
		return
	}
	t := &teamRun{spec: doc.Spec, scope: scope, done: make(chan struct{})}
	t.agent = &teamagent.Agent{Infra: name, DP: a.TeamDP, Log: prefixed{a, name + ": teaming: "},
		Spec: func() (*spec.Spec, error) {
			s, _ := t.current()
			return s, nil
		},
		Scope: func(*spec.Spec) plan.Options {
			_, o := t.current()
			return o
		},
		Event: a.event,
	}
	runCtx, cancel := context.WithCancel(ctx)
	t.cancel = cancel
	if a.teaming == nil {
		a.teaming = map[string]*teamRun{}
	}
	a.teaming[name] = t
	go func() {
		defer close(t.done)
		if err := t.agent.Run(runCtx); err != nil {
			a.logf("%s: teaming: %v\n", name, err)
		}
	}()
	a.logf("%s: teaming agent started: %d teams, %d shared limits on %s\n", name, len(teams), len(limits), a.Host)
}

// stopTeaming stops the infrastructure's teaming agent and waits for it:
// it must not re-steer what a destroy is giving back.
func (a *Agent) stopTeaming(name string) {
	t, ok := a.teaming[name]
	if !ok {
		return
	}
	t.cancel()
	<-t.done
	delete(a.teaming, name)
	a.logf("%s: teaming agent stopped\n", name)
}

func (a *Agent) stopAllTeaming() {
	for name := range a.teaming {
		a.stopTeaming(name)
	}
}

// prefixed writes the teaming agent's log lines into the host agent's log.
type prefixed struct {
	a      *Agent
	prefix string
}

func (p prefixed) Write(b []byte) (int, error) {
	if p.a.Log == nil {
		return len(b), nil
	}
	p.a.logMu.Lock()
	defer p.a.logMu.Unlock()
	if _, err := fmt.Fprintf(p.a.Log, "%s%s", p.prefix, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

var _ io.Writer = prefixed{}
