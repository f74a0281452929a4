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

// IfaceCounters are one interface's counters from /proc/net/dev.
type IfaceCounters struct {
	RxBytes, RxPackets, TxBytes, TxPackets uint64
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

// readIface reads an interface's counters in this process's namespace.
func readIface(name string) (IfaceCounters, error) {
	f, err := os.Open("/proc/self/net/dev")
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
		return IfaceCounters{RxBytes: p(0), RxPackets: p(1), TxBytes: p(8), TxPackets: p(9)}, nil
	}
	return IfaceCounters{}, fmt.Errorf("interface %q not in /proc/net/dev", name)
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
