package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
	"github.com/vnet-project/vnet/internal/teamagent"
)

// AgentUp says whether an agent of an infrastructure runs: on this machine
// the teaming agent (no host), over etcd each host's agent, by its report.
type AgentUp struct {
	Infra, Host string
	Up          bool
}

// agentLister is a backend that knows its agents.
type agentLister interface {
	Agents() ([]AgentUp, error)
}

// remoteBackend is a backend whose kernels are other machines': the
// server exports no counters of its own for it.
type remoteBackend interface {
	ReadsNoKernel() bool
}

var descAgentUp = prometheus.NewDesc("vnet_agent_up",
	"1 when the infrastructure's agent runs: the teaming agent on this machine (host empty), or over etcd the host's agent, by its live report.",
	[]string{"infra", "host"}, nil)

// agentCollector exports vnet_agent_up at each scrape.
type agentCollector struct{ be agentLister }

func (c agentCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descAgentUp }

func (c agentCollector) Collect(ch chan<- prometheus.Metric) {
	agents, err := c.be.Agents()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descAgentUp, err)
		return
	}
	for _, a := range agents {
		v := 0.0
		if a.Up {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descAgentUp, prometheus.GaugeValue, v, a.Infra, a.Host)
	}
}

// Agents are the teaming agents of the infrastructures that team uplinks.
func (b *Local) Agents() ([]AgentUp, error) {
	recs, err := b.List()
	if err != nil {
		return nil, err
	}
	var out []AgentUp
	for _, r := range recs {
		doc, err := storedDoc(r)
		if err != nil || len(plan.HostTeams(doc.Spec)) == 0 {
			continue
		}
		_, up := teamagent.Running(b.StateDir, r.Name)
		out = append(out, AgentUp{Infra: r.Name, Up: up})
	}
	return out, nil
}

// Agents are the host agents each infrastructure names, up while their
// reports live.
func (c *Cluster) Agents() ([]AgentUp, error) {
	recs, err := c.List()
	if err != nil {
		return nil, err
	}
	var out []AgentUp
	for _, r := range recs {
		doc, err := storedDoc(r)
		if err != nil {
			continue
		}
		reports, err := c.Store.Reports(r.Name)
		if err != nil {
			return nil, err
		}
		names := make([]string, len(doc.Spec.Hosts))
		for i, h := range doc.Spec.Hosts {
			names[i] = h.Name
		}
		for _, v := range etcdstore.Assess(r.Generation, names, reports) {
			out = append(out, AgentUp{Infra: r.Name, Host: v.Host, Up: v.State != etcdstore.HostGone})
		}
	}
	return out, nil
}

// ReadsNoKernel: over etcd the counters are each host agent's.
func (c *Cluster) ReadsNoKernel() bool { return true }
