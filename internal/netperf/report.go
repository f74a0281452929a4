package netperf

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// unitScale returns the divisor and label for -f.
func unitScale(u UnitLetter) (float64, string) {
	switch u {
	case 'k':
		return 1e3, "10^3bits/s"
	case 'g':
		return 1e9, "10^9bits/s"
	case 'K':
		return 8 * 1024, "KBytes/s"
	case 'M':
		return 8 * 1024 * 1024, "MBytes/s"
	case 'G':
		return 8 * 1024 * 1024 * 1024, "GBytes/s"
	}
	return 1e6, "10^6bits/s"
}

// WriteText prints the report in netperf's table layout.
func WriteText(w io.Writer, rep *Report) {
	c := rep.Config
	if c.Banner {
		for _, r := range rep.Results {
			fmt.Fprintf(w, "vnet netperf %s to %s port %d (data port %d)%s\n", r.Test, r.Target, c.ControlPort, r.Params.DataPort, instLabel(rep, r))
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cpu := c.LocalCPU || c.RemoteCPU
	switch {
	case c.Test == UDPStream:
		writeUDPStream(tw, rep, cpu)
	case c.IsRR():
		writeRR(tw, rep, cpu)
	default:
		writeStream(tw, rep, cpu)
	}
	tw.Flush()
	writeExtras(w, rep)
}

func instLabel(rep *Report, r *Result) string {
	if len(rep.Results) < 2 {
		return ""
	}
	return fmt.Sprintf(", instance %d", r.Instance)
}

func writeStream(tw io.Writer, rep *Report, cpu bool) {
	div, unit := unitScale(rep.Config.Units)
	if rep.Config.Banner {
		h := [][]string{
			{"Recv", "Send", "Send", "", ""},
			{"Socket", "Socket", "Message", "Elapsed", ""},
			{"Size", "Size", "Size", "Time", "Throughput"},
			{"bytes", "bytes", "bytes", "secs.", unit},
		}
		if cpu {
			extra := [][]string{{"Utilization", "", "Service", "Demand"}, {"Send", "Recv", "Send", "Recv"}, {"local", "remote", "local", "remote"}, {"% S", "% S", "us/KB", "us/KB"}}
			if rep.Config.Test == TCPMaerts {
				extra[1] = []string{"Recv", "Send", "Recv", "Send"}
			}
			for i := range h {
				h[i] = append(h[i], extra[i]...)
			}
		}
		writeHeader(tw, h)
	}
	for _, r := range rep.Results {
		recvBuf, sendBuf, msg := r.Params.RemoteRcvBuf, r.Params.LocalSndBuf, r.Params.SendSize
		if r.Test == TCPMaerts {
			recvBuf, sendBuf = r.Params.LocalRcvBuf, r.Params.RemoteSndBuf
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.2f\t%.2f\t", recvBuf, sendBuf, msg, r.Elapsed, r.Throughput/div)
		if cpu {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t", util(r.Local), util(r.Remote), sd(r.LocalSD), sd(r.RemoteSD))
		}
		fmt.Fprintln(tw)
	}
	if a := rep.Aggregate; a != nil {
		fmt.Fprintf(tw, "aggregate\t%d\tinstances\t\t%.2f\t\n", a.Instances, a.Throughput/div)
	}
}

func writeUDPStream(tw io.Writer, rep *Report, cpu bool) {
	div, unit := unitScale(rep.Config.Units)
	if rep.Config.Banner {
		h := [][]string{
			{"Socket", "Message", "Elapsed", "Messages", "", ""},
			{"Size", "Size", "Time", "Okay", "Errors", "Throughput"},
			{"bytes", "bytes", "secs", "#", "#", unit},
		}
		if cpu {
			extra := [][]string{{"CPU", "Service"}, {"Util", "Demand"}, {"%", "us/KB"}}
			for i := range h {
				h[i] = append(h[i], extra[i]...)
			}
		}
		writeHeader(tw, h)
	}
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%d\t%d\t%.2f\t%d\t%d\t%.2f\t", r.Params.LocalSndBuf, r.Params.SendSize, r.Elapsed, r.Local.Messages, r.Lost, r.SendRate/div)
		if cpu {
			fmt.Fprintf(tw, "%s\t%s\t", util(r.Local), sd(r.LocalSD))
		}
		fmt.Fprintln(tw)
		fmt.Fprintf(tw, "%d\t\t%.2f\t%d\t\t%.2f\t", r.Params.RemoteRcvBuf, r.Elapsed, r.Remote.Messages, r.Throughput/div)
		if cpu {
			fmt.Fprintf(tw, "%s\t%s\t", util(r.Remote), sd(r.RemoteSD))
		}
		fmt.Fprintln(tw)
	}
	if a := rep.Aggregate; a != nil {
		fmt.Fprintf(tw, "aggregate\t%d\tinstances\t\t\t%.2f\t\n", a.Instances, a.Throughput/div)
	}
}

func writeRR(tw io.Writer, rep *Report, cpu bool) {
	if rep.Config.Banner {
		h := [][]string{
			{"Local/Remote", "", "", "", "", ""},
			{"Socket", "Size", "Request", "Resp.", "Elapsed", "Trans."},
			{"Send", "Recv", "Size", "Size", "Time", "Rate"},
			{"bytes", "bytes", "bytes", "bytes", "secs.", "per sec"},
		}
		if cpu {
			extra := [][]string{{"CPU", "", "S.dem", ""}, {"Util", "", "", ""}, {"local", "remote", "local", "remote"}, {"% S", "% S", "us/Tr", "us/Tr"}}
			for i := range h {
				h[i] = append(h[i], extra[i]...)
			}
		}
		writeHeader(tw, h)
	}
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.2f\t%.2f\t", r.Params.LocalSndBuf, r.Params.LocalRcvBuf, r.Params.ReqSize, r.Params.RespSize, r.Elapsed, r.TransRate)
		if cpu {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t", util(r.Local), util(r.Remote), sd(r.LocalSD), sd(r.RemoteSD))
		}
		fmt.Fprintln(tw)
		fmt.Fprintf(tw, "%d\t%d\t\t\t\t\t\n", r.Params.RemoteSndBuf, r.Params.RemoteRcvBuf)
	}
	if a := rep.Aggregate; a != nil {
		fmt.Fprintf(tw, "aggregate\t%d\tinstances\t\t\t%.2f\t\n", a.Instances, a.TransRate)
	}
}

func writeHeader(tw io.Writer, rows [][]string) {
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	// An empty line would end tabwriter's column block and unalign the data.
	fmt.Fprintln(tw, strings.Repeat("\t", len(rows[0])))
}

func util(s SideResults) string {
	if s.CPU == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", s.CPU.Util)
}

func sd(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
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
