package api

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vnet-project/vnet/internal/service"
)

// infraLister is a back end that lists its infrastructures.
type infraLister interface {
	List(ctx context.Context) ([]service.Infra, error)
}

var (
	descInfras = prometheus.NewDesc("vnet_infrastructures",
		"The applied infrastructures the server serves (0 when none is).", []string{}, nil)
	descPaused = prometheus.NewDesc("vnet_paused",
		"1 for each pause in force (vnet pause): target is * for the whole infrastructure, or vm/NAME, network/NAME, portgroup/NAME.",
		[]string{"infra", "target"}, nil)
)

// listTimeout bounds how long a scrape waits for the list.
const listTimeout = 5 * time.Second

// infraCollector exports how many infrastructures there are and what of
// them is paused, at each scrape.
type infraCollector struct{ be infraLister }

func (c infraCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descInfras
	ch <- descPaused
}

func (c infraCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	list, err := c.be.List(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descInfras, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descInfras, prometheus.GaugeValue, float64(len(list)))
	for _, in := range list {
		for _, target := range in.Paused {
			ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, 1, in.Name, target)
		}
	}
}
