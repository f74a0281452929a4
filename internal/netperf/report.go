package netperf

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// The classic report: netperf 2.7's tables, column for column, so that
// scripts that cut columns out of netperf's output read vnet's too.

// WriteText prints the report as netperf does: its classic table for a
// classic test, the selected values (-o, -O, -k) or an OMNI test's
// default columns otherwise, then what netperf has no column for.
func WriteText(w io.Writer, rep *Report) {
	c := rep.Config
	if c.Banner {
		for _, r := range rep.Results {
			fmt.Fprintln(w, banner(rep, r))
		}
	}
	if !c.Legacy() {
		WriteSelected(w, rep)
		writeExtras(w, rep)
		return
	}
	switch {
	case c.Test == UDPStream:
		writeUDPStream(w, rep)
	case c.IsRR():
		writeRR(w, rep)
	default:
		writeStream(w, rep)
	}
	if c.Verbosity > 1 {
		writeVerbose(w, rep)
	}
	writeExtras(w, rep)
}

// writeStreamBlock is -v 2's block under a TCP stream's table: this end
// moves data with mine ("Send" or "Recv"), the netserver with theirs.
func writeStreamBlock(w io.Writer, mine, theirs string, alignOffset [4]int, bytes int64, perCall float64, calls int64, perRemote float64, remoteCalls int64, mss int) {
	fmt.Fprintf(w, "\nAlignment      Offset         %-8.8s %-8.8s    %ss   %-8.8s %ss\n"+
		"Local  Remote  Local  Remote  Xfered   Per                 Per\n"+
		"%s   %s    %s   %s             %s (avg)          %s (avg)\n"+
		"%5d   %5d  %5d   %5d %6d  %6.2f    %6d   %6.2f %6d\n",
		"Bytes", "Bytes", mine, "Bytes", theirs, mine, theirs, mine, theirs, mine, theirs,
		alignOffset[0], alignOffset[1], alignOffset[2], alignOffset[3], bytes, perCall, calls, perRemote, remoteCalls)
	fmt.Fprintf(w, "\nMaximum\nSegment\nSize (bytes)\n%6d\n", mss)
}

// writeVerbose is what netperf adds to its classic tables at -v 2 (built
// without histograms, as it is by default): the buffers' alignments and
// offsets, bytes per call and the MSS for TCP streams, the round trip
// and each direction's throughput for TCP_RR; UDP tests add nothing. The
// columns are netperf's, and so are the values in them, TCP_RR's remote
// offset in the remote alignment's column included.
func writeVerbose(w io.Writer, rep *Report) {
	c := rep.Config
	for _, r := range rep.Results {
		v := view{rep: rep, c: c, r: r}
		lSent, lRecv, rSent, _ := v.bytes()
		lSendCalls, lRecvCalls, rSendCalls, rRecvCalls := v.calls()
		per := func(b, n int64) float64 { return float64(b) / float64(max(n, 1)) }
		switch c.Test {
		case TCPStream:
			writeStreamBlock(w, "Send", "Recv", [4]int{c.LocalSendAlign, c.RemoteRecvAlign, c.LocalSendOffset, c.RemoteRecvOffset},
				lSent, per(lSent, lSendCalls), lSendCalls, per(lSent, rRecvCalls), rRecvCalls, r.MSS)
		case TCPMaerts:
			writeStreamBlock(w, "Recv", "Send", [4]int{c.LocalRecvAlign, c.RemoteRecvAlign, c.LocalRecvOffset, c.RemoteRecvOffset},
				lRecv, per(lRecv, lRecvCalls), lRecvCalls, per(rSent, rSendCalls), rSendCalls, r.MSS)
		case TCPRR:
			units := c.Units
			if units == 'x' {
				units = 'm'
			}
			latency := -1.0
			if r.TransRate > 0 {
				latency = 1e6 / r.TransRate * float64(1+c.FirstBurst)
			}
			fmt.Fprintf(w, "Alignment      Offset         RoundTrip  Trans    Throughput\n"+
				"Local  Remote  Local  Remote  Latency    Rate     %-8.8s/s\n"+
				"Send   Recv    Send   Recv    usec/Tran  per sec  Outbound   Inbound\n"+
				"%5d  %5d   %5d  %5d   %-6.3f   %-6.3f %-6.3f    %-6.3f\n",
				unitLabel(units), c.LocalSendAlign, c.RemoteRecvOffset, c.LocalSendOffset, c.RemoteRecvOffset, latency, r.TransRate,
				scale(r.TransRate*float64(r.Params.ReqSize)*8, units), scale(r.TransRate*float64(r.Params.RespSize)*8, units))
		case TCPCRR:
			fmt.Fprintf(w, "\nAlignment      Offset\nLocal  Remote  Local  Remote\nSend   Recv    Send   Recv\n%5d  %5d   %5d  %5d\n",
				c.LocalSendAlign, c.RemoteRecvAlign, c.LocalSendOffset, c.RemoteRecvOffset)
		}
	}
}

// testTitle is the name netperf gives a test in its first line.
func testTitle(c *Config) string {
	if c.TestName == OMNI {
		return "OMNI " + direction(c.Test) + " TEST"
	}
	return map[string]string{TCPStream: "MIGRATED TCP STREAM TEST", TCPMaerts: "MIGRATED TCP MAERTS TEST", UDPStream: "MIGRATED UDP STREAM TEST",
		TCPRR: "MIGRATED TCP REQUEST/RESPONSE TEST", TCPCRR: "MIGRATED TCP Connect/Request/Response TEST",
		UDPRR: "MIGRATED UDP REQUEST/RESPONSE TEST"}[c.Test]
}

// banner is netperf's first line: the test, its ends, and its options.
func banner(rep *Report, r *Result) string {
	c := rep.Config
	_, src := splitAddr(r.LocalAddr)
	_, dst := splitAddr(r.RemoteAddr)
	fam := "AF_INET"
	if strings.Contains(dst, ":") {
		fam = "AF_INET6"
	}
	if src == "" {
		src = "0.0.0.0"
	}
	var b strings.Builder
	// The ports are the ones asked for (-P), 0 for any.
	fmt.Fprintf(&b, "%s from %s (%s) port %d %s to %s (%s) port %d %s", testTitle(c), src, src, c.LocalDataPort, fam, r.Target, dst,
		c.RemoteDataPort, fam)
	if c.ConfLevel > 0 {
		fmt.Fprintf(&b, " : +/-%.3f%% @ %2d%% conf. ", c.ConfWidth/2, c.ConfLevel)
	}
	if c.LocalNoDelay || c.RemoteNoDelay {
		b.WriteString(" : nodelay")
	}
	if c.NoControl {
		b.WriteString(" : no control")
	}
	if c.LocalBurst > 0 {
		b.WriteString(" : interval")
	}
	b.WriteString(" : demo")
	if strings.Contains(testTitle(c), "REQUEST/RESPONSE") {
		fmt.Fprintf(&b, " : first burst %d", c.FirstBurst)
	}
	if c.LocalBind != nil || c.RemoteBind != nil {
		b.WriteString(" : cpu bind")
	}
	if len(rep.Results) > 1 {
		fmt.Fprintf(&b, " : instance %d", r.Instance)
	}
	return b.String()
}

// brand is -B's text, which netperf prints at the end of a line only
// when the headings are off.
func brand(c *Config) string {
	if c.Banner {
		return ""
	}
	return c.Brand
}

func cpuAsked(c *Config) bool { return c.LocalCPU || c.RemoteCPU }

// briefSD is verbosity 0's figure with CPU: the service demand of this
// end, or of the netserver's when only -C was given.
func briefSD(c *Config, r *Result) (float64, rune) {
	if c.LocalCPU {
		return sdOrNone(r.LocalSD, r.Local), method(r.Local)
	}
	return sdOrNone(r.RemoteSD, r.Remote), method(r.Remote)
}

func writeStream(w io.Writer, rep *Report) {
	c := rep.Config
	units := unitLabel(c.Units)
	maerts := c.Test == TCPMaerts
	if c.Verbosity == 0 {
		for _, r := range rep.Results {
			if cpuAsked(c) {
				sd, m := briefSD(c, r)
				fmt.Fprintf(w, "%6.3f %c %s\n", sd, m, brand(c))
			} else {
				fmt.Fprintf(w, "%7.2f %s\n", scale(r.Throughput, c.Units), brand(c))
			}
		}
		return
	}
	if c.Banner && cpuAsked(c) {
		sendRecv := "Send     Recv     Send    Recv"
		if maerts {
			sendRecv = "Recv     Send     Recv    Send"
		}
		m := rep.Results[0]
		fmt.Fprintf(w, "Recv   Send    Send                          Utilization       Service Demand\n"+
			"Socket Socket  Message  Elapsed              %s\n"+
			"Size   Size    Size     Time     Throughput  local    remote   local   remote\n"+
			"bytes  bytes   bytes    secs.    %-8.8s/s  %% %c      %% %c      us/KB   us/KB\n\n", sendRecv, units, method(m.Local), method(m.Remote))
	} else if c.Banner {
		fmt.Fprintf(w, "Recv   Send    Send                          \n"+
			"Socket Socket  Message  Elapsed              \n"+
			"Size   Size    Size     Time     Throughput  \n"+
			"bytes  bytes   bytes    secs.    %s/sec  \n\n", units)
	}
	for _, r := range rep.Results {
		recvBuf, sendBuf := r.Params.RemoteRcvBuf, r.Params.LocalSndBuf
		if maerts {
			recvBuf, sendBuf = r.Params.LocalRcvBuf, r.Params.RemoteSndBuf
		}
		tput := scale(r.Throughput, c.Units)
		if cpuAsked(c) {
			fmt.Fprintf(w, "%6d %6d %6d    %-6.2f     %7.2f   %-6.2f   %-6.2f   %-6.3f  %-6.3f %s\n", recvBuf, sendBuf, r.Params.SendSize,
				r.Elapsed, tput, util(r.Local), util(r.Remote), sdOrNone(r.LocalSD, r.Local), sdOrNone(r.RemoteSD, r.Remote), brand(c))
		} else {
			fmt.Fprintf(w, "%6d %6d %6d    %-6.2f   %7.2f   %s\n", recvBuf, sendBuf, r.Params.SendSize, r.Elapsed, tput, brand(c))
		}
	}
	if a := rep.Aggregate; a != nil {
		fmt.Fprintf(w, "aggregate of %d instances: %.2f %s/s\n", a.Instances, scale(a.Throughput, c.Units), units)
	}
}

func writeUDPStream(w io.Writer, rep *Report) {
	c := rep.Config
	units := unitLabel(c.Units)
	if c.Verbosity == 0 {
		for _, r := range rep.Results {
			if cpuAsked(c) {
				sd, m := briefSD(c, r)
				fmt.Fprintf(w, "%6.2f %c\n", sd, m)
			} else {
				fmt.Fprintf(w, "%7.2f\n", scale(r.Throughput, c.Units))
			}
		}
		return
	}
	if c.Banner && cpuAsked(c) {
		m := rep.Results[0]
		fmt.Fprintf(w, "Socket  Message  Elapsed      Messages                   CPU      Service\n"+
			"Size    Size     Time         Okay Errors   Throughput   Util     Demand\n"+
			"bytes   bytes    secs            #      #   %s/sec %% %c%c     us/KB\n\n", units, method(m.Local), method(m.Remote))
	} else if c.Banner {
		fmt.Fprintf(w, "Socket  Message  Elapsed      Messages                \n"+
			"Size    Size     Time         Okay Errors   Throughput\n"+
			"bytes   bytes    secs            #      #   %s/sec\n\n", units)
	}
	for _, r := range rep.Results {
		if cpuAsked(c) {
			fmt.Fprintf(w, "%6d  %6d   %-7.2f   %7d %6d    %7.1f     %-6.2f   %-6.3f\n%6d           %-7.2f   %7d           %7.1f     %-6.2f   %-6.3f\n\n",
				r.Params.LocalSndBuf, r.Params.SendSize, r.Elapsed, r.Local.Messages, r.Lost, scale(r.SendRate, c.Units), util(r.Local), sdOrNone(r.LocalSD, r.Local),
				r.Params.RemoteRcvBuf, r.Elapsed, r.Remote.Messages, scale(r.Throughput, c.Units), util(r.Remote), sdOrNone(r.RemoteSD, r.Remote))
		} else {
			fmt.Fprintf(w, "%6d  %6d   %-7.2f   %7d %6d    %7.2f\n%6d           %-7.2f   %7d           %7.2f\n\n",
				r.Params.LocalSndBuf, r.Params.SendSize, r.Elapsed, r.Local.Messages, r.Lost, scale(r.SendRate, c.Units),
				r.Params.RemoteRcvBuf, r.Elapsed, r.Remote.Messages, scale(r.Throughput, c.Units))
		}
	}
	if a := rep.Aggregate; a != nil {
		fmt.Fprintf(w, "aggregate of %d instances: %.2f %s/s\n", a.Instances, scale(a.Throughput, c.Units), units)
	}
}

func writeRR(w io.Writer, rep *Report) {
	c := rep.Config
	crr := c.Test == TCPCRR
	rate := func(r *Result) float64 { return view{rep: rep, c: c, r: r}.throughput() }
	if c.Verbosity == 0 {
		for _, r := range rep.Results {
			switch {
			case cpuAsked(c) && crr:
				sd, _ := briefSD(c, r)
				fmt.Fprintf(w, "%6.3f\n", sd)
			case cpuAsked(c):
				sd, m := briefSD(c, r)
				fmt.Fprintf(w, "%6.3f %c %s\n", sd, m, brand(c))
			case crr:
				fmt.Fprintf(w, "%7.2f\n", rate(r))
			default:
				fmt.Fprintf(w, "%7.2f %s\n", rate(r), brand(c))
			}
		}
		return
	}
	if c.Banner {
		m := rep.Results[0]
		switch {
		case cpuAsked(c):
			methods := fmt.Sprintf("%% %c    %% %c   ", method(m.Local), method(m.Remote))
			if crr {
				methods = "%      %      "
			}
			fmt.Fprintf(w, "Local /Remote\n"+
				"Socket Size   Request Resp.  Elapsed Trans.   CPU    CPU    S.dem   S.dem\n"+
				"Send   Recv   Size    Size   Time    Rate     local  remote local   remote\n"+
				"bytes  bytes  bytes   bytes  secs.   per sec  %s us/Tr   us/Tr\n\n", methods)
		case c.Units != 'x':
			fmt.Fprintf(w, "Local /Remote\n"+
				"Socket Size   Request  Resp.   Elapsed  \n"+
				"Send   Recv   Size     Size    Time     Throughput \n"+
				"bytes  Bytes  bytes    bytes   secs.    %s/sec   \n\n", unitLabel(c.Units))
		default:
			fmt.Fprintf(w, "Local /Remote\n"+
				"Socket Size   Request  Resp.   Elapsed  Trans.\n"+
				"Send   Recv   Size     Size    Time     Rate         \n"+
				"bytes  Bytes  bytes    bytes   secs.    per sec   \n\n")
		}
	}
	for _, r := range rep.Results {
		p := r.Params
		switch {
		case cpuAsked(c):
			gap := "  "
			if c.Test != TCPRR {
				gap = "   " // UDP_RR's and TCP_CRR's tables have one space more
			}
			fmt.Fprintf(w, "%-6d %-6d %-6d  %-6d %-6.2f  %-6.2f"+gap+"%-6.2f %-6.2f %-6.3f  %-6.3f", p.LocalSndBuf, p.LocalRcvBuf, p.ReqSize, p.RespSize,
				r.Elapsed, rate(r), util(r.Local), util(r.Remote), sdOrNone(r.LocalSD, r.Local), sdOrNone(r.RemoteSD, r.Remote))
		default:
			fmt.Fprintf(w, "%-6d %-6d %-6d   %-6d  %-6.2f   %7.2f   ", p.LocalSndBuf, p.LocalRcvBuf, p.ReqSize, p.RespSize, r.Elapsed, rate(r))
		}
		switch {
		case crr:
			fmt.Fprintln(w)
		case cpuAsked(c):
			fmt.Fprintf(w, " %s\n", brand(c))
		default:
			fmt.Fprintf(w, "%s\n", brand(c))
		}
		fmt.Fprintf(w, "%-6d %-6d\n", p.RemoteSndBuf, p.RemoteRcvBuf)
	}
	if a := rep.Aggregate; a != nil {
		fmt.Fprintf(w, "aggregate of %d instances: %.2f Trans/s\n", a.Instances, a.TransRate)
	}
}

// writeExtras prints what netperf's table has no column for: latency
// percentiles (-j), the receiving interface, CPU efficiency, confidence.
func writeExtras(w io.Writer, rep *Report) {
	c := rep.Config
	for _, r := range rep.Results {
		if c.Latency && r.Latency != nil {
			l := r.Latency
			fmt.Fprintf(w, "\nlatency (us): min %.1f mean %.1f p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f stddev %.1f (%d transactions)\n",
				l.Min, l.Mean, l.P50, l.P90, l.P99, l.P999, l.Max, l.Stddev, l.Samples)
		}
		if !c.Banner {
			continue
		}
		if i := r.RecvIface; i != nil && i.RxPackets > 0 {
			fmt.Fprintf(w, "receive interface %s: %.0f packets/s, average %.0f bytes\n", i.Name, i.RxPPS, i.RxAvgPacket)
			if i.StackRxPackets > 0 {
				fmt.Fprintf(w, "receiving IP stack, after GRO: %.0f packets/s, average %.0f bytes\n", i.StackRxPPS, i.StackRxAvgPacket)
			}
		}
		if r.Efficiency > 0 {
			note := ""
			if sameMachine(r) {
				note = " (both ends on one machine: its cores counted once)"
			}
			fmt.Fprintf(w, "cpu efficiency: %.2f Gbit/s per core used%s\n", r.Efficiency, note)
		}
		if r.Lost > 0 && c.Test == UDPRR {
			fmt.Fprintf(w, "lost transactions: %d\n", r.Lost)
		}
	}
	if cf := rep.Confidence; cf != nil {
		state := "achieved"
		if !cf.Achieved {
			state = "NOT achieved"
		}
		width := fmt.Sprintf("%.1f%%", cf.Width)
		if cf.Width < 0 {
			width = "undefined (one iteration)"
		}
		fmt.Fprintf(w, "confidence %d%% within %.1f%% %s: interval width %s after %d iterations (mean %.2f)\n",
			cf.Level, cf.Target, state, width, cf.Iterations, cf.Mean)
	}
}

// WriteJSON prints the whole report as one JSON object.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// StreamEvent is one line of --json-stream.
type StreamEvent struct {
	Event   string   `json:"event"` // "interim" or "result"
	Interim *Interim `json:"interim,omitempty"`
	Report  *Report  `json:"report,omitempty"`
}
