package metrics

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// RegisterIdentity registers what an exporter says of itself whatever it
// holds: vnet_build_info and the Go runtime's and the process's
// collectors. A scrape of a vnet with nothing applied then still tells
// "nothing here" from "broken". version is vnet's (empty: what the Go
// toolchain recorded).
func RegisterIdentity(reg prometheus.Registerer, version string) {
	if version == "" {
		version = recordedVersion()
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "vnet_build_info",
		Help:        "Always 1: the vnet build that answers, by its version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	info.Set(1)
	reg.MustRegister(info, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// recordedVersion is the module version or VCS revision the toolchain
// stamped, or "unknown".
func recordedVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			return s.Value[:min(len(s.Value), 12)]
		}
	}
	return "unknown"
}
