package netperf

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// What -d prints, and the TCP_INFO lines netperf prints with -d -d or
// DUMP_TCP_INFO in its environment (flent sets it and reads them into its
// metadata). Both go to Config.Diag, stderr in the command, so that the
// results on stdout parse as they do without them.

// diagMu keeps lines of concurrent tests whole.
var diagMu sync.Mutex

// debugf prints one debug line with -d.
func (c *Config) debugf(format string, args ...any) {
	if c.Debug == 0 || c.Diag == nil {
		return
	}
	diagMu.Lock()
	defer diagMu.Unlock()
	fmt.Fprintf(c.Diag, "netperf: debug: "+format+"\n", args...)
}

// dumpTCPInfo prints a TCP socket's TCP_INFO as netperf 2.7's
// dump_tcp_info does, its spelling of tpci_snd_cwnd included: flent reads
// the lines as name-value pairs.
func (c *Config) dumpTCPInfo(s *sock) {
	ti, err := unix.GetsockoptTCPInfo(s.fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil || c.Diag == nil {
		return
	}
	diagMu.Lock()
	defer diagMu.Unlock()
	fmt.Fprintf(c.Diag, "tcpi_rto %d tcpi_ato %d tcpi_pmtu %d tcpi_rcv_ssthresh %d\n"+
		"tcpi_rtt %d tcpi_rttvar %d tcpi_snd_ssthresh %d tpci_snd_cwnd %d\n"+
		"tcpi_reordering %d tcpi_total_retrans %d\n",
		ti.Rto, ti.Ato, ti.Pmtu, ti.Rcv_ssthresh, ti.Rtt, ti.Rttvar, ti.Snd_ssthresh, ti.Snd_cwnd, ti.Reordering, ti.Total_retrans)
}
