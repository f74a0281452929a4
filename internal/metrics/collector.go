package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

var (
	portLabels   = []string{"infra", "host", "vm", "vnic", "portgroup"}
	uplinkLabels = []string{"infra", "host", "switch", "uplink", "nic"}
	poolLabels   = []string{"infra", "host", "switch", "uplink", "pool"}

	descUp = prometheus.NewDesc("vnet_up", "1 when every counter of the infrastructure could be read at this scrape, else 0.", []string{"infra"}, nil)

	descPortTx      = prometheus.NewDesc("vnet_port_transmit_bytes_total", "Bytes a VM's vNIC (or a host port) sent into its switch.", portLabels, nil)
	descPortRx      = prometheus.NewDesc("vnet_port_receive_bytes_total", "Bytes a VM's vNIC (or a host port) received from its switch.", portLabels, nil)
	descPortTxDrops = prometheus.NewDesc("vnet_port_transmit_drops_total", "Packets a VM's vNIC (or a host port) dropped sending into its switch.", portLabels, nil)
	descPortRxDrops = prometheus.NewDesc("vnet_port_receive_drops_total", "Packets a VM's vNIC (or a host port) dropped receiving from its switch.", portLabels, nil)
	descPortUp      = prometheus.NewDesc("vnet_port_up", "1 when the vNIC is up and connected to its port group.", portLabels, nil)

	descPortSecurity = prometheus.NewDesc("vnet_port_security_packets_total",
		"Packets a rule of the port's firewall counted, by counter: a security check's drops (forged-mac, ip-spoof, arp-spoof, nd-spoof, stacked-vlan, ra-guard, not-for-mac), "+
			"an ACL rule's matches (acl[N], N from 0 in spec order, allow or deny) or the ACL default's drops (acl-default).",
		append(append([]string{}, portLabels...), "counter"), nil)

	descUplinkTx   = prometheus.NewDesc("vnet_uplink_transmit_bytes_total", "Bytes a host's uplink NIC sent to the physical switch.", uplinkLabels, nil)
	descUplinkRx   = prometheus.NewDesc("vnet_uplink_receive_bytes_total", "Bytes a host's uplink NIC received from the physical switch.", uplinkLabels, nil)
	descUplinkUp   = prometheus.NewDesc("vnet_uplink_up", "1 when the uplink NIC is up with carrier.", uplinkLabels, nil)
	descUplinkLine = prometheus.NewDesc("vnet_uplink_line_bits_per_second", "The uplink NIC's line rate.", uplinkLabels, nil)

	descPoolTx      = prometheus.NewDesc("vnet_pool_transmit_bytes_total", "Bytes a Network I/O Control pool sent through an uplink.", poolLabels, nil)
	descPoolPackets = prometheus.NewDesc("vnet_pool_transmit_packets_total", "Packets a Network I/O Control pool sent through an uplink.", poolLabels, nil)
	descPoolDrops   = prometheus.NewDesc("vnet_pool_drops_total", "Packets of the pool dropped at the uplink.", poolLabels, nil)
	descPoolOver    = prometheus.NewDesc("vnet_pool_overlimits_total", "Times the pool's class was over its rate and had to borrow or wait.", poolLabels, nil)
	descPoolBacklog = prometheus.NewDesc("vnet_pool_backlog_bytes", "Bytes queued in the pool's class now.", poolLabels, nil)
	descPoolShares  = prometheus.NewDesc("vnet_pool_shares", "The pool's shares (low 25, normal 50, high 100, or 1..100).", poolLabels, nil)
	descPoolLimit   = prometheus.NewDesc("vnet_pool_limit_bits_per_second", "The pool's limit per host; absent when it has none.", poolLabels, nil)
	descPoolResv    = prometheus.NewDesc("vnet_pool_reservation_bits_per_second", "The pool's reservation; absent when it has none.", poolLabels, nil)
	descPoolAssured = prometheus.NewDesc("vnet_pool_assured_bits_per_second", "The rate the pool's class is assured on this uplink.", poolLabels, nil)
	descPoolCeil    = prometheus.NewDesc("vnet_pool_ceil_bits_per_second", "The most the pool's class may take on this uplink.", poolLabels, nil)

	lbLabels        = []string{"infra", "host", "site", "lb", "vip", "backend", "port", "proto"}
	descLBConns     = prometheus.NewDesc("vnet_lb_backend_connections_total", "Connections the host's client ports sent the backend from the VIP.", lbLabels, nil)
	descLBActive    = prometheus.NewDesc("vnet_lb_backend_active_connections", "Connections of the host's client ports with the backend now: TCP not closed, UDP with a datagram in the last minute.", lbLabels, nil)
	descLBBackendUp = prometheus.NewDesc("vnet_lb_backend_up", "1 when the host's client ports send the backend new connections, 0 when they mark it down (its health check failed, or its host reports nothing).", lbLabels, nil)
)

// Collector reads counters when Prometheus scrapes, so a scrape sees the
// kernel as it is then, not a copy taken earlier.
type Collector struct {
	Infras func() []*spec.Spec
	Open   OpenCounting
	// Host, when set, collects only that host's part of each
	// infrastructure that places something on it, as a cluster's host
	// agent realizes it (ReadHost), with host-level links in HostNS.
	Host, HostNS string
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUp, descPortTx, descPortRx, descPortTxDrops, descPortRxDrops, descPortUp, descPortSecurity, descUplinkTx, descUplinkRx, descUplinkUp, descUplinkLine,
		descPoolTx, descPoolPackets, descPoolDrops, descPoolOver, descPoolBacklog, descPoolShares, descPoolLimit, descPoolResv, descPoolAssured, descPoolCeil,
		descLBConns, descLBActive, descLBBackendUp} {
		ch <- d
	}
}

// Collect reads every infrastructure's counters.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	infras := c.Infras()
	counting, done, err := c.Open()
	if err == nil {
		defer done()
	}
	for _, s := range infras {
		if err != nil {
			ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0, s.Name)
			continue
		}
		if c.Host != "" && !plan.PlacesOn(s, c.Host) {
			continue
		}
		snap, rerr := c.read(counting, s)
		if rerr != nil {
			ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0, s.Name)
			continue
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1, s.Name)
		emit(ch, snap)
	}
}

func (c *Collector) read(counting Counting, s *spec.Spec) (*Snapshot, error) {
	if c.Host != "" {
		return ReadHost(counting, s, c.Host, c.HostNS)
	}
	return Read(counting, s)
}

func emit(ch chan<- prometheus.Metric, s *Snapshot) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, p := range s.Ports {
		l := []string{s.Infra, p.Host, p.VM, p.VNIC, p.PortGroup}
		counter(descPortTx, p.TxBytes, l...)
		counter(descPortRx, p.RxBytes, l...)
		counter(descPortTxDrops, p.TxDrops, l...)
		counter(descPortRxDrops, p.RxDrops, l...)
		gauge(descPortUp, b2f(p.Up), l...)
	}
	for _, p := range s.Security {
		for label, n := range p.Counters {
			counter(descPortSecurity, n, s.Infra, p.Host, p.VM, p.VNIC, p.PortGroup, label)
		}
	}
	for _, b := range s.Balancers {
		l := []string{s.Infra, b.Host, b.Site, b.LB, b.VIP, b.Backend, strconv.Itoa(b.Port), b.Proto}
		counter(descLBConns, b.Total, l...)
		gauge(descLBActive, float64(b.Active), l...)
		gauge(descLBBackendUp, b2f(b.Up), l...)
	}
	for _, u := range s.Uplinks {
		l := []string{s.Infra, u.Host, u.Switch, u.Uplink, u.NIC}
		counter(descUplinkTx, u.TxBytes, l...)
		counter(descUplinkRx, u.RxBytes, l...)
		gauge(descUplinkUp, b2f(u.Up), l...)
		gauge(descUplinkLine, float64(u.Line), l...)
	}
	for _, p := range s.Pools {
		l := []string{s.Infra, p.Host, p.Switch, p.Uplink, p.Pool}
		counter(descPoolTx, p.Counters.Bytes, l...)
		counter(descPoolPackets, p.Counters.Packets, l...)
		counter(descPoolDrops, p.Counters.Drops, l...)
		counter(descPoolOver, p.Counters.Overlimits, l...)
		gauge(descPoolBacklog, float64(p.Counters.Backlog), l...)
		gauge(descPoolShares, float64(p.Shares), l...)
		gauge(descPoolAssured, float64(p.Assured), l...)
		gauge(descPoolCeil, float64(p.Ceil), l...)
		if p.Limit > 0 {
			gauge(descPoolLimit, float64(p.Limit), l...)
		}
		if p.Reservation > 0 {
			gauge(descPoolResv, float64(p.Reservation), l...)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// NewApplyHistogram is the duration of applies (and dry runs) made through
// the API, by result: ok, invalid or failed.
func NewApplyHistogram() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vnet_apply_duration_seconds",
		Help:    "Time an apply took through the API, from the request's spec to the host converged (or rolled back).",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"dry_run", "result"})
}
