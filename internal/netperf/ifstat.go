package netperf

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// IfaceCounters are one interface's counters from /proc/net/dev, and the
// namespace's IP receive counters beside them.
type IfaceCounters struct {
	RxBytes, RxPackets, TxBytes, TxPackets uint64
	Stack                                  *StackCounters // nil where they could not be read
}

// StackCounters count what the namespace's IP layer took in, IPv4 and IPv6
// together. GRO runs between the interface and the IP layer, so where the
// interface counts frames as they arrived, these count the packets the
// stack was handed: S1's "packets delivered to the VM", which LRO cuts to a
// seventh at the same bytes.
type StackCounters struct {
	Packets, Bytes uint64
}

// IfaceDelta is an interface's traffic during a test: how S1's receive
// offload becomes visible (fewer, larger packets for the same bytes).
type IfaceDelta struct {
	Name        string  `json:"name"`
	RxPackets   uint64  `json:"rx_packets"`
	RxBytes     uint64  `json:"rx_bytes"`
	TxPackets   uint64  `json:"tx_packets"`
	TxBytes     uint64  `json:"tx_bytes"`
	Elapsed     float64 `json:"elapsed_s"`
	RxPPS       float64 `json:"rx_packets_per_s"`
	RxAvgPacket float64 `json:"rx_avg_packet_bytes"`
	TxPPS       float64 `json:"tx_packets_per_s"`
	TxAvgPacket float64 `json:"tx_avg_packet_bytes"`
	// The namespace's IP layer over the same window (every interface, so
	// other traffic in the namespace counts too). Bytes are IP lengths,
	// without the Ethernet header the interface counts.
	StackRxPackets   uint64  `json:"stack_rx_packets"`
	StackRxBytes     uint64  `json:"stack_rx_bytes"`
	StackRxPPS       float64 `json:"stack_rx_packets_per_s"`
	StackRxAvgPacket float64 `json:"stack_rx_avg_packet_bytes"`
}

// ifaceFor names the interface that holds a local address ("lo" for loopback).
func ifaceFor(ip net.IP) string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return i.Name
			}
		}
	}
	return ""
}

// ReadIface reads an interface's counters, and the IP stack's, in the
// calling thread's namespace.
func ReadIface(name string) (IfaceCounters, error) {
	f, err := os.Open(procNet + "dev")
	if err != nil {
		return IfaceCounters{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(n) != name {
			continue
		}
		v := strings.Fields(rest)
		if len(v) < 10 {
			break
		}
		p := func(i int) uint64 { x, _ := strconv.ParseUint(v[i], 10, 64); return x }
		return IfaceCounters{RxBytes: p(0), RxPackets: p(1), TxBytes: p(8), TxPackets: p(9), Stack: readStack()}, nil
	}
	return IfaceCounters{}, fmt.Errorf("interface %q not in /proc/net/dev", name)
}

// procNet is /proc/net as the calling thread sees it: the namespace it
// entered with setns, whatever the process's other threads are in.
const procNet = "/proc/thread-self/net/"

// readStack reads the namespace's IP receive counters, or nil where IPv4's
// cannot be read; IPv6's count nothing where they are missing (IPv6
// disabled).
//
// InReceives counts one per packet that reaches ip_rcv, which after GRO is
// one per coalesced packet; InOctets counts its whole length.
func readStack() *StackCounters {
	snmp, err := readProc("snmp", parseProcTable)
	if err != nil {
		return nil
	}
	netstat, err := readProc("netstat", parseProcTable)
	if err != nil {
		return nil
	}
	c := &StackCounters{Packets: snmp["Ip:InReceives"], Bytes: netstat["IpExt:InOctets"]}
	if v, err := readProc("snmp6", parseProcList); err == nil {
		c.Packets += v["Ip6InReceives"]
		c.Bytes += v["Ip6InOctets"]
	}
	return c
}

func readProc(name string, parse func(string) (map[string]uint64, error)) (map[string]uint64, error) {
	b, err := os.ReadFile(procNet + name)
	if err != nil {
		return nil, err
	}
	v, err := parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", procNet, name, err)
	}
	return v, nil
}

// parseProcTable reads /proc/net/snmp's layout: for each protocol a line of
// names, then a line of values, both led by "Proto:". Keys are "Proto:Name".
func parseProcTable(text string) (map[string]uint64, error) {
	out := map[string]uint64{}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines)%2 != 0 {
		return nil, fmt.Errorf("%d lines, want pairs of names and values", len(lines))
	}
	for i := 0; i < len(lines); i += 2 {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || len(names) != len(values) || names[0] != values[0] {
			return nil, fmt.Errorf("line %d: names and values do not pair", i+1)
		}
		for j := 1; j < len(names); j++ {
			// Some values are signed (Tcp MaxConn is -1); those are not counters.
			if v, err := strconv.ParseUint(values[j], 10, 64); err == nil {
				out[names[0]+names[j]] = v
			}
		}
	}
	return out, nil
}

// parseProcList reads /proc/net/snmp6's layout: a name and a value per line.
func parseProcList(text string) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	return out, nil
}

func ifaceDelta(name string, a, b IfaceCounters, elapsed float64) *IfaceDelta {
	d := &IfaceDelta{Name: name, RxPackets: b.RxPackets - a.RxPackets, RxBytes: b.RxBytes - a.RxBytes,
		TxPackets: b.TxPackets - a.TxPackets, TxBytes: b.TxBytes - a.TxBytes, Elapsed: elapsed}
	if elapsed > 0 {
		d.RxPPS, d.TxPPS = float64(d.RxPackets)/elapsed, float64(d.TxPackets)/elapsed
	}
	if d.RxPackets > 0 {
		d.RxAvgPacket = float64(d.RxBytes) / float64(d.RxPackets)
	}
	if d.TxPackets > 0 {
		d.TxAvgPacket = float64(d.TxBytes) / float64(d.TxPackets)
	}
	if a.Stack == nil || b.Stack == nil {
		return d
	}
	d.StackRxPackets, d.StackRxBytes = b.Stack.Packets-a.Stack.Packets, b.Stack.Bytes-a.Stack.Bytes
	if elapsed > 0 {
		d.StackRxPPS = float64(d.StackRxPackets) / elapsed
	}
	if d.StackRxPackets > 0 {
		d.StackRxAvgPacket = float64(d.StackRxBytes) / float64(d.StackRxPackets)
	}
	return d
}

// HostInfo identifies the machine an end ran on.
type HostInfo struct {
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"`
	CPUs     int    `json:"cpus"`
	Arch     string `json:"arch"`
}

func hostInfo() HostInfo {
	h, _ := os.Hostname()
	var u syscall.Utsname
	_ = syscall.Uname(&u)
	rel := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	return HostInfo{Hostname: h, Kernel: string(rel), CPUs: runtime.NumCPU(), Arch: runtime.GOARCH}
}
