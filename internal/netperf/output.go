package netperf

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// What the output selectors print, computed from one result as netperf
// computes its own: its units, its -1 for "not measured", its names.

// view is one result as the selectors see it.
type view struct {
	rep *Report
	c   *Config
	r   *Result
}

// unitLabel is netperf's name for -f's unit, without the "/s".
func unitLabel(u UnitLetter) string {
	switch u {
	case 'k':
		return "10^3bits"
	case 'g':
		return "10^9bits"
	case 'K':
		return "KBytes"
	case 'M':
		return "MBytes"
	case 'G':
		return "GBytes"
	case 'x':
		return "Trans"
	}
	return "10^6bits"
}

// scale converts bit/s to -f's unit.
func scale(bps float64, u UnitLetter) float64 {
	switch u {
	case 'k':
		return bps / 1e3
	case 'g':
		return bps / 1e9
	case 'K':
		return bps / 8 / 1024
	case 'M':
		return bps / 8 / (1 << 20)
	case 'G':
		return bps / 8 / (1 << 30)
	}
	return bps / 1e6
}

// throughput is netperf's THROUGHPUT: in -f's unit, transactions for a
// request/response test in 'x'.
func (v view) throughput() float64 {
	r := v.r
	if v.c.IsRR() {
		if v.c.Units == 'x' {
			return r.TransRate
		}
		return scale(float64(r.Transactions)*float64(r.Params.ReqSize+r.Params.RespSize)*8/r.Elapsed, v.c.Units)
	}
	if v.c.Test == UDPStream {
		return scale(r.Throughput, v.c.Units)
	}
	return scale(r.Throughput, v.c.Units)
}

// bytes is what each end sent and received.
func (v view) bytes() (lSent, lRecv, rSent, rRecv int64) {
	r := v.r
	switch v.c.Test {
	case TCPStream, UDPStream:
		return r.Local.Bytes, 0, 0, r.Remote.Bytes
	case TCPMaerts, UDPMaerts:
		return 0, r.Local.Bytes, r.Remote.Bytes, 0
	}
	req, resp := int64(r.Params.ReqSize), int64(r.Params.RespSize)
	return r.Transactions * req, r.Transactions * resp, r.Remote.Transactions * resp, r.Remote.Transactions * req
}

// calls is how many send and receive calls each end made, as far as
// vnet counts them (a stream's loop counts its calls; a request/response
// loop one of each per transaction).
func (v view) calls() (lSend, lRecv, rSend, rRecv int64) {
	r := v.r
	switch v.c.Test {
	case TCPStream, UDPStream:
		return r.Local.Messages, 0, 0, r.Remote.Messages
	case TCPMaerts, UDPMaerts:
		return 0, r.Local.Messages, r.Remote.Messages, 0
	}
	return r.Transactions, r.Transactions, r.Remote.Transactions, r.Remote.Transactions
}

func util(s SideResults) float64 {
	if s.CPU == nil {
		return -1
	}
	return s.CPU.Util
}

func sdOrNone(v float64, side SideResults) float64 {
	if side.CPU == nil {
		return -1
	}
	return v
}

// cpuKind is one kind of the CPU's time (USER, SYSTEM, IOWAIT, IRQ,
// SWINTR); 0 when not measured, as netperf prints it.
func cpuKind(s SideResults, kind string) float64 {
	if s.CPU == nil {
		return 0
	}
	return map[string]float64{"USER": s.CPU.User, "SYSTEM": s.CPU.System, "IOWAIT": s.CPU.IOWait, "IRQ": s.CPU.IRQ, "SWINTR": s.CPU.SoftIRQ}[kind]
}

func method(s SideResults) rune {
	if s.CPU == nil {
		return 'U'
	}
	return 'S' // /proc/stat
}

func peak(s SideResults) (float64, int) {
	if s.CPU == nil {
		return 0, 0
	}
	best, id := 0.0, 0
	for i, p := range s.CPU.PerCPU {
		if p > best {
			best, id = p, i
		}
	}
	return best, id
}

func cpuCount(s SideResults) int {
	if s.CPU == nil {
		return s.Host.CPUs
	}
	return s.CPU.NumCPU
}

func direction(test string) string {
	switch test {
	case TCPStream, UDPStream:
		return "Send"
	case TCPMaerts, UDPMaerts:
		return "Receive"
	case TCPCRR:
		return "Connect|Send|Recv"
	}
	return "Send|Recv"
}

func orNeg(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

func reqOrDefault(n int) int {
	if n > 0 {
		return n
	}
	return -1
}

// latencyUS is a latency figure in whole microseconds, as netperf's
// histogram gives them, or -1 without samples.
func (v view) latencyUS(f func(*Latency) float64) int {
	if v.r.Latency == nil {
		return -1
	}
	return int(f(v.r.Latency))
}

// latencyFigure is the figure of each whole-microsecond latency selector.
var latencyFigure = map[string]func(*Latency) float64{
	"MIN_LATENCY": func(l *Latency) float64 { return l.Min },
	"MAX_LATENCY": func(l *Latency) float64 { return l.Max },
	"P50_LATENCY": func(l *Latency) float64 { return l.P50 },
	"P90_LATENCY": func(l *Latency) float64 { return l.P90 },
	"P99_LATENCY": func(l *Latency) float64 { return l.P99 },
}

// value is a selector's value.
func (v view) value(name string) any {
	c, r := v.c, v.r
	lSent, lRecv, rSent, rRecv := v.bytes()
	lSendCalls, lRecvCalls, rSendCalls, rRecvCalls := v.calls()
	per := func(b, n int64) float64 {
		if n == 0 {
			return 0
		}
		return float64(b) / float64(n)
	}
	tput := func(b int64) float64 {
		if r.Elapsed <= 0 {
			return 0
		}
		u := c.Units
		if u == 'x' {
			u = 'm'
		}
		return scale(float64(b)*8/r.Elapsed, u)
	}
	sdUnit := "usec/KB"
	if c.IsRR() {
		sdUnit = "usec/Tran"
	}
	proto, sockType := "TCP", "Stream"
	if isUDP(c.Test) {
		proto, sockType = "UDP", "Dgram"
	}
	lPeak, lPeakID := peak(r.Local)
	rPeak, rPeakID := peak(r.Remote)
	conf := v.rep.Confidence
	localPort, localAddr := splitAddr(r.LocalAddr)
	remotePort, remoteAddr := splitAddr(r.RemoteAddr)
	switch name {
	case "OUTPUT_NONE":
		return " "
	case "OUTPUT_END":
		return ""
	case "SOCKET_TYPE":
		return sockType
	case "PROTOCOL":
		return proto
	case "DIRECTION":
		return direction(c.Test)
	case "ELAPSED_TIME":
		return r.Elapsed
	case "THROUGHPUT":
		return v.throughput()
	case "THROUGHPUT_UNITS":
		return unitLabel(c.Units)
	case "LSS_SIZE_REQ":
		return reqOrDefault(c.LocalSndBuf)
	case "LSS_SIZE", "LSS_SIZE_END":
		return r.Params.LocalSndBuf
	case "LSR_SIZE_REQ":
		return reqOrDefault(c.LocalRcvBuf)
	case "LSR_SIZE", "LSR_SIZE_END":
		return r.Params.LocalRcvBuf
	case "RSS_SIZE_REQ":
		return reqOrDefault(c.RemoteSndBuf)
	case "RSS_SIZE", "RSS_SIZE_END":
		return r.Params.RemoteSndBuf
	case "RSR_SIZE_REQ":
		return reqOrDefault(c.RemoteRcvBuf)
	case "RSR_SIZE", "RSR_SIZE_END":
		return r.Params.RemoteRcvBuf
	case "LOCAL_SEND_SIZE":
		if c.Test == TCPStream || c.Test == UDPStream {
			return r.Params.SendSize
		}
		return 0
	case "LOCAL_RECV_SIZE":
		if c.Test == TCPMaerts || c.Test == UDPMaerts {
			return r.Params.RecvSize
		}
		return 0
	case "REMOTE_SEND_SIZE":
		switch c.Test {
		case TCPMaerts, UDPMaerts:
			return r.Params.SendSize
		case TCPStream, UDPStream:
			return -1
		}
		return r.Params.RespSize
	case "REMOTE_RECV_SIZE":
		switch c.Test {
		case TCPStream, UDPStream:
			return r.Params.RecvSize
		case TCPMaerts, UDPMaerts:
			return -1
		}
		return r.Params.ReqSize
	case "REQUEST_SIZE":
		if c.IsRR() {
			return r.Params.ReqSize
		}
		return -1
	case "RESPONSE_SIZE":
		if c.IsRR() {
			return r.Params.RespSize
		}
		return -1
	case "LOCAL_CPU_UTIL":
		return util(r.Local)
	case "REMOTE_CPU_UTIL":
		return util(r.Remote)
	case "LOCAL_CPU_PERCENT_USER", "LOCAL_CPU_PERCENT_SYSTEM", "LOCAL_CPU_PERCENT_IOWAIT", "LOCAL_CPU_PERCENT_IRQ", "LOCAL_CPU_PERCENT_SWINTR":
		return cpuKind(r.Local, name[len("LOCAL_CPU_PERCENT_"):])
	case "REMOTE_CPU_PERCENT_USER", "REMOTE_CPU_PERCENT_SYSTEM", "REMOTE_CPU_PERCENT_IOWAIT", "REMOTE_CPU_PERCENT_IRQ", "REMOTE_CPU_PERCENT_SWINTR":
		return cpuKind(r.Remote, name[len("REMOTE_CPU_PERCENT_"):])
	case "LOCAL_CPU_METHOD":
		return method(r.Local)
	case "REMOTE_CPU_METHOD":
		return method(r.Remote)
	case "LOCAL_SD":
		return sdOrNone(r.LocalSD, r.Local)
	case "REMOTE_SD":
		return sdOrNone(r.RemoteSD, r.Remote)
	case "SD_UNITS":
		return sdUnit
	case "CONFIDENCE_LEVEL":
		if conf == nil {
			return 0
		}
		return conf.Level
	case "CONFIDENCE_INTERVAL":
		if conf == nil {
			return -1.0
		}
		return conf.Target
	case "CONFIDENCE_ITERATION":
		if conf == nil {
			return 1
		}
		return conf.Iterations
	case "THROUGHPUT_CONFID":
		if conf == nil || conf.Width < 0 {
			return -1.0
		}
		return conf.Width
	case "LOCAL_CPU_CONFID", "REMOTE_CPU_CONFID":
		return -1.0
	case "TRANSACTION_RATE":
		if c.IsRR() {
			return r.TransRate
		}
		return 1.0 // netperf's value when a stream has no transactions
	case "RT_LATENCY":
		if !c.IsRR() || r.TransRate <= 0 {
			return -1.0
		}
		if c.Test == TCPCRR {
			return 1e6 / r.TransRate
		}
		// A transaction waits behind the first burst's.
		return 1e6 / r.TransRate * float64(1+c.FirstBurst)
	case "BURST_SIZE":
		return c.FirstBurst
	case "LOCAL_TRANSPORT_RETRANS":
		return r.Local.Retrans
	case "REMOTE_TRANSPORT_RETRANS":
		return r.Remote.Retrans
	case "TRANSPORT_MSS":
		return r.MSS
	case "LOCAL_SEND_THROUGHPUT":
		return tput(lSent)
	case "LOCAL_RECV_THROUGHPUT":
		return tput(lRecv)
	case "REMOTE_SEND_THROUGHPUT":
		return tput(rSent)
	case "REMOTE_RECV_THROUGHPUT":
		return tput(rRecv)
	case "LOCAL_CPU_BIND":
		return orNeg(c.LocalBind)
	case "REMOTE_CPU_BIND":
		return orNeg(c.RemoteBind)
	case "LOCAL_CPU_COUNT":
		return cpuCount(r.Local)
	case "REMOTE_CPU_COUNT":
		return cpuCount(r.Remote)
	case "LOCAL_CPU_PEAK_UTIL":
		return lPeak
	case "LOCAL_CPU_PEAK_ID":
		return lPeakID
	case "REMOTE_CPU_PEAK_UTIL":
		return rPeak
	case "REMOTE_CPU_PEAK_ID":
		return rPeakID
	case "LOCAL_CPU_FREQUENCY", "REMOTE_CPU_FREQUENCY":
		return 0
	case "SOURCE_PORT":
		return localPort
	case "SOURCE_ADDR":
		return localAddr
	case "SOURCE_FAMILY":
		return family(localAddr)
	case "DEST_PORT":
		return remotePort
	case "DEST_ADDR":
		return remoteAddr
	case "DEST_FAMILY":
		return family(remoteAddr)
	case "LOCAL_SEND_CALLS":
		return lSendCalls
	case "LOCAL_RECV_CALLS":
		return lRecvCalls
	case "REMOTE_SEND_CALLS":
		return rSendCalls
	case "REMOTE_RECV_CALLS":
		return rRecvCalls
	case "LOCAL_BYTES_PER_RECV":
		return per(lRecv, lRecvCalls)
	case "LOCAL_BYTES_PER_SEND":
		return per(lSent, lSendCalls)
	case "REMOTE_BYTES_PER_RECV":
		return per(rRecv, rRecvCalls)
	case "REMOTE_BYTES_PER_SEND":
		return per(rSent, rSendCalls)
	case "LOCAL_BYTES_SENT":
		return lSent
	case "LOCAL_BYTES_RECVD":
		return lRecv
	case "LOCAL_BYTES_XFERD":
		return float64(lSent + lRecv)
	case "REMOTE_BYTES_SENT":
		return rSent
	case "REMOTE_BYTES_RECVD":
		return rRecv
	case "REMOTE_BYTES_XFERD":
		return float64(rSent + rRecv)
	case "LOCAL_SEND_OFFSET":
		return c.LocalSendOffset
	case "LOCAL_RECV_OFFSET":
		return c.LocalRecvOffset
	case "LOCAL_SEND_ALIGN":
		return c.LocalSendAlign
	case "LOCAL_RECV_ALIGN":
		return c.LocalRecvAlign
	case "REMOTE_SEND_OFFSET":
		return c.RemoteSendOffset
	case "REMOTE_RECV_OFFSET":
		return c.RemoteRecvOffset
	case "REMOTE_SEND_ALIGN":
		return c.RemoteSendAlign
	case "REMOTE_RECV_ALIGN":
		return c.RemoteRecvAlign
	case "LOCAL_SEND_WIDTH":
		return r.Params.LocalSendWidth
	case "LOCAL_RECV_WIDTH":
		return r.Params.LocalRecvWidth
	case "REMOTE_SEND_WIDTH":
		return r.Params.RemoteSendWidth
	case "REMOTE_RECV_WIDTH":
		return r.Params.RemoteRecvWidth
	case "LOCAL_SEND_DIRTY_COUNT", "LOCAL_RECV_DIRTY_COUNT", "LOCAL_RECV_CLEAN_COUNT",
		"REMOTE_SEND_DIRTY_COUNT", "REMOTE_RECV_DIRTY_COUNT", "REMOTE_RECV_CLEAN_COUNT":
		return -1
	case "LOCAL_NODELAY":
		return boolInt(c.LocalNoDelay)
	case "REMOTE_NODELAY":
		return boolInt(c.RemoteNoDelay)
	case "LOCAL_CORK", "REMOTE_CORK":
		// netperf's -C sets both, though only this end's socket is corked.
		return boolInt(c.Cork)
	case "LOCAL_INTERFACE_VENDOR", "LOCAL_INTERFACE_DEVICE", "LOCAL_INTERFACE_SUBVENDOR", "LOCAL_INTERFACE_SUBDEVICE",
		"REMOTE_INTERFACE_VENDOR", "REMOTE_INTERFACE_DEVICE", "REMOTE_INTERFACE_SUBVENDOR", "REMOTE_INTERFACE_SUBDEVICE":
		return -2 // netperf's "not looked up"
	case "LOCAL_INTERVAL_USECS":
		return int(c.LocalInterval.Microseconds())
	case "LOCAL_INTERVAL_BURST":
		return c.LocalBurst
	// The netserver's pacing as asked, as netperf prints it (netperf's
	// own netserver paces only when built with intervals; JSON has what
	// it answered).
	case "REMOTE_INTERVAL_USECS":
		return int(c.RemoteInterval.Microseconds())
	case "REMOTE_INTERVAL_BURST":
		return c.RemoteBurst
	case "LOCAL_SECURITY_TYPE_ID", "LOCAL_SECURITY_ENABLED_NUM", "REMOTE_SECURITY_TYPE_ID", "REMOTE_SECURITY_ENABLED_NUM":
		return 0
	case "UUID":
		return v.rep.UUID
	case "MIN_LATENCY", "MAX_LATENCY", "P50_LATENCY", "P90_LATENCY", "P99_LATENCY":
		return v.latencyUS(latencyFigure[name])
	case "MEAN_LATENCY":
		if r.Latency == nil {
			return -1.0
		}
		return r.Latency.Mean
	case "STDDEV_LATENCY":
		if r.Latency == nil {
			return -1.0
		}
		return r.Latency.Stddev
	case "LOCAL_SOCKET_PRIO":
		return c.LocalPrio
	case "REMOTE_SOCKET_PRIO":
		return c.RemotePrio
	case "LOCAL_SOCKET_TOS":
		return c.LocalTOS
	case "REMOTE_SOCKET_TOS":
		return c.RemoteTOS
	case "LOCAL_CONG_CONTROL":
		return r.Local.CongControl
	case "REMOTE_CONG_CONTROL":
		return r.Remote.CongControl
	case "LOCAL_FILL_FILE":
		return c.FillFile
	case "REMOTE_FILL_FILE":
		return c.RemoteFill
	case "COMMAND_LINE":
		return strings.Join(v.rep.Command, " ")
	case "RESULT_BRAND":
		return c.Brand
	}
	// What netperf itself no longer reports: its models, drivers, slots,
	// system names and security settings print "Deprecated".
	return "Deprecated"
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// splitAddr is a "host:port" address's port and host.
func splitAddr(a string) (port, host string) {
	i := strings.LastIndexByte(a, ':')
	if i < 0 {
		return "0", a
	}
	return a[i+1:], strings.Trim(a[:i], "[]")
}

// family is the address family's number, as netperf prints it (Linux's).
func family(addr string) int {
	switch {
	case addr == "":
		return 0
	case strings.Contains(addr, ":"):
		return 10
	}
	return 2
}

// text formats a selector's value as netperf does.
func (v view) text(s *selector) string {
	val := v.value(s.name)
	switch x := val.(type) {
	case int:
		if strings.Contains(s.format, "x") {
			return fmt.Sprintf(s.format, uint32(int32(x)))
		}
		return fmt.Sprintf(s.format, x)
	case int64:
		return fmt.Sprintf(s.format, x)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			x = -1
		}
		return fmt.Sprintf(s.format, x)
	case rune:
		return fmt.Sprintf(s.format, x)
	case string:
		return fmt.Sprintf(s.format, x)
	}
	return fmt.Sprint(val)
}

// WriteSelected prints each result's selected values: a comma-separated
// heading and line (-o), NAME=value lines (-k), or columns under four
// lines of headings (-O, and an OMNI test's default).
func WriteSelected(w io.Writer, rep *Report) {
	c := rep.Config
	for _, r := range rep.Results {
		v := view{rep: rep, c: c, r: r}
		switch c.Output {
		case OutputCSV:
			v.writeCSV(w)
		case OutputKeyVal:
			v.writeKeyVal(w)
		default:
			v.writeColumns(w)
		}
	}
}

func (v view) writeCSV(w io.Writer) {
	var heads, vals []string
	for _, block := range v.c.Selectors {
		for _, name := range block {
			s := selectorIndex[name]
			var h []string
			for _, l := range s.heading {
				if l != "" {
					h = append(h, l)
				}
			}
			heads = append(heads, strings.Join(h, " "))
			vals = append(vals, v.text(s))
		}
	}
	if v.c.Banner {
		fmt.Fprintln(w, strings.Join(heads, ","))
	}
	fmt.Fprintln(w, strings.Join(vals, ","))
}

func (v view) writeKeyVal(w io.Writer) {
	for _, block := range v.c.Selectors {
		for _, name := range block {
			fmt.Fprintf(w, "%s=%s\n", name, v.text(selectorIndex[name]))
		}
	}
}

// writeColumns prints each block as netperf's -O does: every column as
// wide as its widest heading line or its value, one space between.
func (v view) writeColumns(w io.Writer) {
	for i, block := range v.c.Selectors {
		if i > 0 {
			fmt.Fprintln(w)
		}
		var head [4]strings.Builder
		var line strings.Builder
		for _, name := range block {
			s := selectorIndex[name]
			val := v.text(s)
			width := len(val) + 1
			for _, l := range s.heading {
				width = max(width, len(l))
			}
			for k, l := range s.heading {
				fmt.Fprintf(&head[k], "%-*s ", width, l)
			}
			fmt.Fprintf(&line, "%-*s ", width, val)
		}
		if v.c.Banner {
			for k := range head {
				fmt.Fprintln(w, head[k].String())
			}
		}
		fmt.Fprintln(w, line.String())
	}
}

// WriteSelectorList prints the selectors as -o ? and -k ? do (comma
// separated) or as -O ? does (one a line).
func WriteSelectorList(w io.Writer, mode OutputMode) {
	sep := ","
	if mode == OutputHuman {
		sep = "\n"
	}
	fmt.Fprintln(w, strings.Join(SelectorNames(), sep))
}

// NetperfVersion is the netperf whose protocol and options vnet netperf
// speaks.
const NetperfVersion = "2.7.1"

// InterimLine is one interim result (-D) as netperf prints it in the
// output mode: its human line, a CSV line, or NETPERF_*[n]= lines with
// the n-th interval of that test (counts keeps them). The interval ends
// at a Unix time with milliseconds.
func InterimLine(c *Config, e Interim, counts map[string]int) string {
	rate := e.Rate
	if c.IsRR() && c.Units == 'x' {
		rate = e.Rate // transactions/s
	} else if !c.IsRR() {
		rate = scale(e.Rate, c.Units)
	}
	units := unitLabel(c.Units)
	ending := fmt.Sprintf("%.3f", e.Ending)
	suffix := ""
	if len(c.Targets)*c.Instances > 1 {
		suffix = fmt.Sprintf(" (%s #%d)", e.Target, e.Instance)
	}
	switch c.Output {
	case OutputCSV:
		return fmt.Sprintf("%7.2f,%s/s,%.3f,%s\n", rate, units, e.Interval, ending)
	case OutputKeyVal:
		key := fmt.Sprintf("%s#%d", e.Target, e.Instance)
		n := counts[key]
		counts[key] = n + 1
		return fmt.Sprintf("NETPERF_INTERIM_RESULT[%d]=%.2f\nNETPERF_UNITS[%d]=%s/s\nNETPERF_INTERVAL[%d]=%.3f\nNETPERF_ENDING[%d]=%s\n",
			n, rate, n, units, n, e.Interval, n, ending)
	}
	return fmt.Sprintf("Interim result: %7.2f %s/s over %.3f seconds ending at %s%s\n", rate, units, e.Interval, ending, suffix)
}
