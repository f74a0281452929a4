package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vnet-project/vnet/internal/service"
)

// agentLister is a back end that knows its agents.
type agentLister interface {
	Agents() ([]service.AgentUp, error)
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
