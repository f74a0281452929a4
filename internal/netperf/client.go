package netperf

import (
	"context"
	"fmt"
	"github.com/vnet-project/vnet/internal/netperf/wire"
	"golang.org/x/sys/unix"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vnet-project/vnet/internal/cpustat"
)

// Result is one test between this host and one netserver.
type Result struct {
	Test     string `json:"test"`
	Target   string `json:"target"`
	Instance int    `json:"instance"`

	Params Params `json:"parameters"`

	Elapsed      float64 `json:"elapsed_s"`
	Throughput   float64 `json:"throughput_bps,omitempty"`      // streams: what the receiver got, bit/s
	SendRate     float64 `json:"send_throughput_bps,omitempty"` // UDP_STREAM: what the sender sent
	TransRate    float64 `json:"transactions_per_s,omitempty"`  // RR
	Transactions int64   `json:"transactions,omitempty"`
	Lost         int64   `json:"lost,omitempty"` // UDP: datagrams the sender could not send, or RR timeouts

	Local  SideResults `json:"local"`
	Remote SideResults `json:"remote"`

	// Service demand: µs of CPU (all cores) per KB (streams) or per
	// transaction (RR), as netperf defines it.
	LocalSD  float64 `json:"local_service_demand,omitempty"`
	RemoteSD float64 `json:"remote_service_demand,omitempty"`
	SDUnit   string  `json:"service_demand_unit,omitempty"`
	// CPU efficiency as seed S1 defines it: Gbit/s per core used, counting
	// the cores used at both ends (on one machine they are the same cores).
	Efficiency float64 `json:"cpu_efficiency_gbps_per_core,omitempty"`

	RecvIface *IfaceDelta `json:"receive_interface,omitempty"`
	Latency   *Latency    `json:"latency,omitempty"`

	// Peer is the netserver's kind: "vnet" (it took up the extension and
	// reported its side in full) or "netperf".
	Peer string `json:"peer"`
	MSS  int    `json:"transport_mss"` // this end's TCP maximum segment size, -1 when not known
	// The data connection's ends, host:port.
	LocalAddr  string `json:"local_address,omitempty"`
	RemoteAddr string `json:"remote_address,omitempty"`
}

// Params are the parameters in effect, as asked and as granted.
type Params struct {
	Length         float64 `json:"length"`
	SendSize       int     `json:"send_size"`
	RecvSize       int     `json:"recv_size"`
	ReqSize        int     `json:"req_size,omitempty"`
	RespSize       int     `json:"resp_size,omitempty"`
	LocalSndBufReq int     `json:"local_sndbuf_requested"`
	LocalRcvBufReq int     `json:"local_rcvbuf_requested"`
	RemoteSndReq   int     `json:"remote_sndbuf_requested"`
	RemoteRcvReq   int     `json:"remote_rcvbuf_requested"`
	LocalSndBuf    int     `json:"local_sndbuf"`
	LocalRcvBuf    int     `json:"local_rcvbuf"`
	RemoteSndBuf   int     `json:"remote_sndbuf"`
	RemoteRcvBuf   int     `json:"remote_rcvbuf"`
	DataPort       int     `json:"data_port"`
	LocalBind      *int    `json:"local_cpu_bind,omitempty"` // -T
	RemoteBind     *int    `json:"remote_cpu_bind,omitempty"`
	// What the netserver said it would send and receive per call.
	RemoteSendSize int `json:"remote_send_size"`
	RemoteRecvSize int `json:"remote_recv_size"`
}

// Interim is a progress event from a running test (-D).
type Interim struct {
	Target   string  `json:"target"`
	Instance int     `json:"instance"`
	At       float64 `json:"at_s"`
	Ending   float64 `json:"ending_unix_s"` // when the interval ended, as netperf prints it
	Interval float64 `json:"interval_s"`
	Rate     float64 `json:"rate"` // bit/s for streams, transactions/s for RR
	Unit     string  `json:"unit"`
}

// Run performs one test against one netserver. events, if not nil, gets
// interim results every c.Interval.
//
// The test speaks netperf's protocol: a DO_OMNI request, the netserver's
// response, the data phase, its results. The request carries the
// extension's mark; a netserver that answers with its own (vnet's) also
// hears "done" from this end and sends its side's measurements in full.
func Run(ctx context.Context, c *Config, tg Target, instance int, events func(Interim)) (*Result, error) {
	ctl, err := c.dialControl(ctx, tg)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	stop := context.AfterFunc(ctx, func() { ctl.Close() })
	defer stop()

	dataHost, explicit := tg.Host, netip.Addr{}
	if c.DataHost != "" {
		dataHost = c.DataHost
		explicit, _ = netip.ParseAddr(c.DataHost)
	}
	family := tg.Family
	if ra, ok := ctl.RemoteAddr().(*net.TCPAddr); ok && family == "" && !explicit.IsValid() {
		family = "6"
		if ra.IP.To4() != nil {
			family = "4"
		}
	}
	if explicit.IsValid() {
		family = "6"
		if explicit.Unmap().Is4() {
			family = "4"
		}
	}
	ctl.SetDeadline(time.Now().Add(30 * time.Second))
	if c.Passphrase != "" {
		m := &wire.Message{Type: wire.Passphrase}
		copy(m.Data[:wire.DataSize-1], c.Passphrase)
		if err := wire.Write(ctl, m); err != nil {
			return nil, fmt.Errorf("send passphrase: %w", err)
		}
	}
	if err := wire.Write(ctl, c.omniRequest(family, netip.AddrPort{}, explicit)); err != nil {
		return nil, fmt.Errorf("send request: %w", err)
	}
	m, err := wire.Read(ctl)
	if err != nil {
		return nil, fmt.Errorf("netserver: %w", err)
	}
	ext, hasExt, _ := wire.GetExt(m)
	if !hasExt {
		ext = wire.Ext{}
	}
	if m.Aux != 0 {
		return nil, remoteError(ctl, m.Aux, ext)
	}
	ready, err := wire.DecodeOmniResponse(m)
	if err != nil {
		return nil, fmt.Errorf("netserver: %w", err)
	}
	ctl.SetDeadline(time.Time{})

	r := &Result{Test: c.Test, Target: tg.Host, Instance: instance, MSS: -1}
	r.Params = Params{Length: c.Length, SendSize: c.SendSize, RecvSize: c.RecvSize, LocalSndBufReq: c.LocalSndBuf, LocalRcvBufReq: c.LocalRcvBuf,
		RemoteSndReq: c.RemoteSndBuf, RemoteRcvReq: c.RemoteRcvBuf, DataPort: int(ready.DataPort), RemoteSndBuf: int(ready.SendBufSize), RemoteRcvBuf: int(ready.RecvBufSize),
		LocalBind: c.LocalBind, RemoteBind: c.RemoteBind, RemoteSendSize: int(ready.SendSize), RemoteRecvSize: int(ready.RecvSize)}
	if c.IsRR() {
		r.Params.ReqSize, r.Params.RespSize = c.ReqSize, c.RespSize
	}
	r.Peer = "netperf"
	if ext.Flags != 0 {
		r.Peer = "vnet"
	}
	dataAddr := net.JoinHostPort(dataHost, strconv.Itoa(int(ready.DataPort)))
	r.RemoteAddr = dataAddr
	if ra, ok := ctl.RemoteAddr().(*net.TCPAddr); ok && !explicit.IsValid() {
		r.RemoteAddr = net.JoinHostPort(ra.IP.String(), strconv.Itoa(int(ready.DataPort)))
	}

	p := phase{lossAfter: time.Duration(c.UDPTimeout) * time.Second,
		bufs: bufLayout{sendAlign: c.LocalSendAlign, sendOffset: c.LocalSendOffset, recvAlign: c.LocalRecvAlign, recvOffset: c.LocalRecvOffset, fill: c.fill}}
	if c.Wait > 0 {
		select { // -s: netperf waits between the setup and the data
		case <-time.After(c.Wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// Cancelling the run (Ctrl-C) stops the data loops at their next timeout.
	stopData := context.AfterFunc(ctx, func() { p.stop.Store(true) })
	defer stopData()
	// So does a netserver that stops answering, when the netserver would
	// have cut the test off itself: a response that never comes, or a
	// stream it stops reading, would otherwise hold this end until
	// interrupted.
	var cutOff atomic.Bool
	limit := cutOffAfter(c.Duration())
	cut := time.AfterFunc(limit, func() { cutOff.Store(true); p.stop.Store(true) })
	defer cut.Stop()
	stopInterim := startInterim(c, tg, instance, &p, events)
	ifname := ""
	var ifA IfaceCounters
	cpuA, _ := cpustat.Take()
	t, local, err := c.runLocal(dataAddr, family, &p, r, &ifname, &ifA)
	cpuB, _ := cpustat.Take()
	ifB, _ := ReadIface(ifname)
	stopInterim()
	if err != nil {
		if cutOff.Load() {
			return nil, fmt.Errorf("%s data phase: the netserver stopped answering; cut off after %v", c.Test, limit)
		}
		return nil, fmt.Errorf("%s data phase: %w", c.Test, err)
	}
	// netperf's netserver ends a TCP_CRR test by its own timer, PAD_TIME
	// past the length.
	ctl.SetDeadline(time.Now().Add(30*time.Second + padTime))
	if ext.Flags&wire.ExtDone != 0 {
		if err := WriteMsg(ctl, &Message{Type: MsgDone}); err != nil {
			return nil, fmt.Errorf("send done: %w", err)
		}
	}
	if m, err = wire.Read(ctl); err != nil {
		return nil, fmt.Errorf("netserver: results: %w", err)
	}
	if m.Aux != 0 {
		if e, ok, _ := wire.GetExt(m); ok {
			ext = e
		}
		return nil, remoteError(ctl, m.Aux, ext)
	}
	ores, err := wire.DecodeOmniResults(m)
	if err != nil {
		return nil, fmt.Errorf("netserver: %w", err)
	}
	r.Remote = sideFromOmni(c.Test, ores, c.RemoteCPU || c.LocalCPU)
	if ext.Flags&wire.ExtResults != 0 {
		res, err := expect(ctl, MsgResults)
		if err != nil {
			return nil, err
		}
		r.Remote = *res.Results
	}
	// A TCP data socket's buffers are known only once the server accepted it.
	r.Params.RemoteSndBuf, r.Params.RemoteRcvBuf = r.Remote.SndBuf, r.Remote.RcvBuf
	r.Local = local
	r.Local.Bytes, r.Local.Messages, r.Local.Transactions, r.Local.Elapsed = t.Bytes, t.Messages, t.Transactions, t.elapsed()
	r.Local.Host = hostInfo()
	if c.LocalCPU || c.RemoteCPU {
		u := cpustat.Between(cpuA, cpuB)
		r.Local.CPU = firstCPUs(u, c.NumCPUs)
	}
	if ifname != "" {
		r.Local.Iface = ifaceDelta(ifname, ifA, ifB, cpuB.At.Sub(cpuA.At).Seconds())
	}
	r.compute(c, t)
	return r, nil
}

// dialControl opens the control connection, from -L's address if given.
func (c *Config) dialControl(ctx context.Context, tg Target) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if c.LocalHost != "" || c.LocalControlPort > 0 {
		ip := net.ParseIP(c.LocalHost)
		if c.LocalHost != "" && ip == nil {
			addrs, err := net.DefaultResolver.LookupIP(ctx, "ip"+tg.Family, c.LocalHost)
			if err != nil || len(addrs) == 0 {
				return nil, fmt.Errorf("-L %s: %v", c.LocalHost, err)
			}
			ip = addrs[0]
		}
		d.LocalAddr = &net.TCPAddr{IP: ip, Port: c.LocalControlPort}
	}
	ctl, err := d.DialContext(ctx, network("tcp", tg.Family), net.JoinHostPort(tg.Host, strconv.Itoa(c.ControlPort)))
	if err != nil {
		return nil, fmt.Errorf("connect to netserver at %s port %d: %w (is a netserver running there?)", tg.Host, c.ControlPort, err)
	}
	return ctl, nil
}

// remoteError is a netserver's refusal: its reason when it gives one, its
// errno as netperf prints it otherwise.
func remoteError(ctl net.Conn, errno int32, ext wire.Ext) error {
	if ext.Flags&wire.ExtErrors != 0 {
		ctl.SetDeadline(time.Now().Add(5 * time.Second))
		if m, err := ReadMsg(ctl); err == nil && m.Type == MsgError {
			return fmt.Errorf("netserver: %s", m.Error)
		}
	}
	return fmt.Errorf("netserver: remote error %d: %v", errno, unix.Errno(errno))
}

// firstCPUs is the utilization of the first n CPUs (-n), as netperf
// counts it when told how many CPUs there are; n 0 is all of them.
func firstCPUs(u cpustat.Usage, n int) *cpustat.Usage {
	if n <= 0 || n >= len(u.PerCPU) {
		return &u
	}
	var sum float64
	for _, p := range u.PerCPU[:n] {
		sum += p
	}
	u.NumCPU, u.PerCPU = n, u.PerCPU[:n]
	u.Util = sum / float64(n)
	u.Cores = u.Util / 100 * float64(n)
	return &u
}

func expect(ctl net.Conn, typ string) (*Message, error) {
	m, err := ReadMsg(ctl)
	if err != nil {
		return nil, fmt.Errorf("netserver: %w", err)
	}
	if m.Type == MsgError {
		return nil, fmt.Errorf("netserver: %s", m.Error)
	}
	if m.Type != typ {
		return nil, fmt.Errorf("netserver: expected %s, got %s", typ, m.Type)
	}
	return m, nil
}

// maxUDP is the largest UDP payload over IPv4.
const maxUDP = 65507

// DefaultUDPSize is the UDP_STREAM message when -m is not given: the
// largest datagram that fits a 1500-byte MTU unfragmented.
const DefaultUDPSize = 1472

// runLocal opens this end's data socket and runs the test's loop.
func (c *Config) runLocal(addr, family string, p *phase, r *Result, ifname *string, ifA *IfaceCounters) (tally, SideResults, error) {
	local := SideResults{Retrans: -1}
	opts := sockOpts{snd: c.LocalSndBuf, rcv: c.LocalRcvBuf, tos: c.LocalTOS, cong: c.LocalCong, noDelay: c.LocalNoDelay, family: family,
		prio: c.LocalPrio, keep: c.KeepAlive}
	d := net.Dialer{Timeout: 10 * time.Second, Control: opts.control}
	if c.LocalDataPort > 0 || c.LocalDataHost != "" {
		ip := net.ParseIP(c.LocalDataHost)
		if c.Test == UDPStream || c.Test == UDPRR {
			d.LocalAddr = &net.UDPAddr{IP: ip, Port: c.LocalDataPort}
		} else {
			d.LocalAddr = &net.TCPAddr{IP: ip, Port: c.LocalDataPort}
		}
	}
	proto := "tcp"
	if c.Test == UDPStream || c.Test == UDPRR {
		proto = "udp"
	}
	dial := func() (*sock, net.Addr, error) {
		conn, err := d.Dial(network(proto, family), addr)
		if err != nil {
			return nil, nil, err
		}
		la := conn.LocalAddr()
		s, err := blocking(conn.(syscall.Conn), conn)
		return s, la, err
	}
	if c.Test == TCPCRR {
		d.LocalAddr = nil // one port cannot serve every connection
		first := true
		dialEach := func() (*sock, error) {
			s, la, err := dial()
			if err == nil && first {
				// The interface is sampled at the first connection.
				first = false
				*ifname = ifaceFor(localIP(la))
				*ifA, _ = ReadIface(*ifname)
				r.LocalAddr = la.String()
				local.SndBuf, local.RcvBuf = s.bufSizes()
			}
			return s, err
		}
		t, err := crrClient(dialEach, c.ReqSize, c.RespSize, c.Duration(), c.Count(), p, true)
		r.Params.LocalSndBuf, r.Params.LocalRcvBuf = local.SndBuf, local.RcvBuf
		return t, local, err
	}
	s, la, err := dial()
	if err != nil {
		return tally{}, local, fmt.Errorf("data connection to %s: %w", addr, err)
	}
	defer s.Close()
	*ifname = ifaceFor(localIP(la))
	*ifA, _ = ReadIface(*ifname)
	r.LocalAddr = la.String()
	local.SndBuf, local.RcvBuf = s.bufSizes()
	r.Params.LocalSndBuf, r.Params.LocalRcvBuf = local.SndBuf, local.RcvBuf
	var t tally
	switch c.Test {
	case TCPStream:
		size := orDefault(c.SendSize, local.SndBuf)
		r.Params.SendSize, r.Params.RecvSize = size, orDefault(c.RemoteRecvSize, r.Params.RemoteRcvBuf)
		if r.Params.RemoteRecvSize > 0 {
			r.Params.RecvSize = r.Params.RemoteRecvSize
		}
		t, err = streamSend(s, size, c.Duration(), c.Count(), p)
	case TCPMaerts:
		size := orDefault(c.RecvSize, local.RcvBuf)
		r.Params.RecvSize, r.Params.SendSize = size, orDefault(c.RemoteSendSize, r.Params.RemoteSndBuf)
		if r.Params.RemoteSendSize > 0 {
			r.Params.SendSize = r.Params.RemoteSendSize
		}
		t, err = streamRecv(s, size, p)
	case TCPRR:
		t, err = rrClient(s, c.ReqSize, c.RespSize, c.Duration(), c.Count(), p, true)
	case UDPStream:
		size := c.SendSize
		if size == 0 {
			size = DefaultUDPSize
		}
		r.Params.SendSize, r.Params.RecvSize = size, orDefault(c.RemoteRecvSize, maxUDP)
		t, err = udpSend(s, size, c.Duration(), c.Count(), p)
	case UDPRR:
		t, err = udpRRClient(s, c.ReqSize, c.RespSize, c.Duration(), c.Count(), p, true)
	default:
		return tally{}, local, fmt.Errorf("unknown test %s", c.Test)
	}
	if c.Test == UDPStream || c.Test == UDPRR {
		s.endUDP()
	} else {
		local.Retrans, local.CongControl = s.tcpInfo()
		r.MSS = s.mss()
	}
	return t, local, err
}

// compute derives throughput, service demand, efficiency and latency.
func (r *Result) compute(c *Config, t tally) {
	r.Elapsed = t.elapsed()
	r.Lost = t.Lost
	cpuSD := func(side *SideResults, units float64) float64 {
		if side.CPU == nil || units <= 0 {
			return 0
		}
		return side.CPU.Util / 100 * float64(side.CPU.NumCPU) * side.CPU.Elapsed * 1e6 / units
	}
	switch c.Test {
	case TCPStream, TCPMaerts, UDPStream:
		recv, send := &r.Remote, &r.Local
		if c.Test == TCPMaerts {
			recv, send = &r.Local, &r.Remote
		}
		el := recv.Elapsed
		if c.Test == UDPStream {
			el = r.Elapsed // the sender's clock, as netperf: datagrams have no FIN
			r.SendRate = float64(send.Bytes) * 8 / el
		}
		if el > 0 {
			r.Throughput = float64(recv.Bytes) * 8 / el
		}
		r.LocalSD = cpuSD(&r.Local, float64(r.Local.Bytes)/1024)
		r.RemoteSD = cpuSD(&r.Remote, float64(r.Remote.Bytes)/1024)
		r.SDUnit = "us/KB"
		r.RecvIface = recv.Iface
		cores := 0.0
		if r.Local.CPU != nil {
			cores = r.Local.CPU.Cores
		}
		if r.Remote.CPU != nil && !sameMachine(r) {
			cores += r.Remote.CPU.Cores
		}
		if cores > 0 {
			r.Efficiency = r.Throughput / 1e9 / cores
		}
	default:
		r.Transactions = t.Transactions
		if r.Elapsed > 0 {
			r.TransRate = float64(t.Transactions) / r.Elapsed
		}
		r.LocalSD = cpuSD(&r.Local, float64(t.Transactions))
		r.RemoteSD = cpuSD(&r.Remote, float64(r.Remote.Transactions))
		r.SDUnit = "us/Tr"
		r.RecvIface = r.Remote.Iface
		r.Latency = Summarize(t.Latencies)
	}
}

// sameMachine reports whether both ends ran on one kernel, where the
// system-wide CPU figures are the same cores counted twice.
func sameMachine(r *Result) bool {
	return r.Local.Host.Hostname == r.Remote.Host.Hostname && r.Local.Host.Kernel == r.Remote.Host.Kernel
}

func startInterim(c *Config, tg Target, instance int, p *phase, events func(Interim)) func() {
	if c.Interval <= 0 || events == nil {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(c.Interval)
		defer tick.Stop()
		start, last, lastN := time.Now(), time.Now(), int64(0)
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				// The tick's own time is when it was due; on a busy
				// machine the count is read later than that.
				n, now := p.count.Load(), time.Now()
				iv := now.Sub(last).Seconds()
				ev := Interim{Target: tg.Host, Instance: instance, At: now.Sub(start).Seconds(), Interval: iv,
					Ending: float64(now.UnixMilli()) / 1e3}
				if c.IsRR() {
					ev.Rate, ev.Unit = float64(n-lastN)/iv, "trans/s"
				} else {
					ev.Rate, ev.Unit = float64(n-lastN)*8/iv, "bit/s"
				}
				events(ev)
				last, lastN = now, n
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}
