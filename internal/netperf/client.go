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
	// The buffer rings' widths (-W) at each end, and the netserver's
	// pacing (-w, -b), as it said.
	LocalSendWidth      int `json:"local_send_width,omitempty"`
	LocalRecvWidth      int `json:"local_recv_width,omitempty"`
	RemoteSendWidth     int `json:"remote_send_width,omitempty"`
	RemoteRecvWidth     int `json:"remote_recv_width,omitempty"`
	RemoteIntervalUsecs int `json:"remote_interval_us,omitempty"`
	RemoteIntervalBurst int `json:"remote_interval_burst,omitempty"`
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
// With -N there is no netserver: the data connection goes to a port
// already listening (discard, chargen or echo by default), and only this
// end is measured.
func Run(ctx context.Context, c *Config, tg Target, instance int, events func(Interim)) (*Result, error) {
	if c.NoControl {
		return c.runWithoutControl(ctx, tg, instance, events)
	}
	ctl, err := c.dialControl(ctx, tg)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	stop := context.AfterFunc(ctx, func() { ctl.Close() })
	defer stop()
	c.debugf("control connection from %s to %s", ctl.LocalAddr(), ctl.RemoteAddr())

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
	// A UDP test where the netserver sends needs this end's socket
	// first: the request says where to send.
	var recvSock *sock
	var recvAt netip.AddrPort
	if c.Test == UDPMaerts {
		if recvSock, recvAt, err = c.bindReceiver(ctx, family, ctl.LocalAddr()); err != nil {
			return nil, err
		}
		defer recvSock.Close()
	}
	ctl.SetDeadline(time.Now().Add(30 * time.Second))
	if c.Passphrase != "" {
		m := &wire.Message{Type: wire.Passphrase}
		copy(m.Data[:wire.DataSize-1], c.Passphrase)
		if err := wire.Write(ctl, m); err != nil {
			return nil, fmt.Errorf("send passphrase: %w", err)
		}
	}
	if err := wire.Write(ctl, c.omniRequest(family, recvAt, explicit)); err != nil {
		return nil, fmt.Errorf("send request: %w", err)
	}
	c.debugf("sent the %s request (OMNI), %d bytes", c.Test, wire.MessageSize)
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
	c.debugf("netserver: data port %d, socket buffers send %d receive %d, sizes send %d receive %d, widths %d,%d, interval %d us burst %d, extension %#x",
		ready.DataPort, ready.SendBufSize, ready.RecvBufSize, ready.SendSize, ready.RecvSize, ready.SendWidth, ready.RecvWidth,
		ready.IntervalUsecs, ready.IntervalBurst, ext.Flags)

	r := c.newResult(tg, instance)
	r.Params.DataPort, r.Params.RemoteSndBuf, r.Params.RemoteRcvBuf = int(ready.DataPort), int(ready.SendBufSize), int(ready.RecvBufSize)
	r.Params.RemoteSendSize, r.Params.RemoteRecvSize = int(ready.SendSize), int(ready.RecvSize)
	r.Params.RemoteSendWidth, r.Params.RemoteRecvWidth = int(ready.SendWidth), int(ready.RecvWidth)
	r.Params.RemoteIntervalUsecs, r.Params.RemoteIntervalBurst = int(ready.IntervalUsecs), int(ready.IntervalBurst)
	r.Peer = "netperf"
	if ext.Flags != 0 {
		r.Peer = "vnet"
	}
	remote, err := resolveData(ctx, dataHost, int(ready.DataPort), family)
	if err != nil {
		return nil, err
	}
	r.RemoteAddr = remote.String()
	if ra, ok := ctl.RemoteAddr().(*net.TCPAddr); ok && !explicit.IsValid() {
		r.RemoteAddr = net.JoinHostPort(ra.IP.String(), strconv.Itoa(int(ready.DataPort)))
	}

	lr, err := c.dataPhase(ctx, tg, instance, events, remote, family, recvSock, r)
	if err != nil {
		return nil, err
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
	c.debugf("netserver: results: %d bytes received, %d sent, %d transactions in %.3f s, CPU %.2f%%",
		ores.BytesReceived, ores.BytesSent, ores.TransReceived, ores.Elapsed, ores.CPUUtil)
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
	lr.finish(c, r)
	return r, nil
}

// newResult is a result with the parameters asked for.
func (c *Config) newResult(tg Target, instance int) *Result {
	r := &Result{Test: c.Test, Target: tg.Host, Instance: instance, MSS: -1}
	r.Params = Params{Length: c.Length, SendSize: c.SendSize, RecvSize: c.RecvSize, LocalSndBufReq: c.LocalSndBuf, LocalRcvBufReq: c.LocalRcvBuf,
		RemoteSndReq: c.RemoteSndBuf, RemoteRcvReq: c.RemoteRcvBuf, LocalBind: c.LocalBind, RemoteBind: c.RemoteBind}
	if c.IsRR() {
		r.Params.ReqSize, r.Params.RespSize = c.ReqSize, c.RespSize
	}
	return r
}

// runWithoutControl is -N: the data connection to a port that already
// listens, and this end's measurements alone.
func (c *Config) runWithoutControl(ctx context.Context, tg Target, instance int, events func(Interim)) (*Result, error) {
	host := tg.Host
	if c.DataHost != "" {
		host = c.DataHost
	}
	port := c.RemoteDataPort
	if port == 0 {
		port = noControlPort(c.Test)
	}
	remote, err := resolveData(ctx, host, port, tg.Family)
	if err != nil {
		return nil, err
	}
	family := tg.Family
	if family == "" {
		family = "6"
		if remote.Addr().Unmap().Is4() {
			family = "4"
		}
	}
	c.debugf("no control connection: the data connection goes to %s", remote)
	r := c.newResult(tg, instance)
	r.Params.DataPort, r.Peer, r.RemoteAddr = port, "none", remote.String()
	r.Params.RemoteSndBuf, r.Params.RemoteRcvBuf, r.Params.RemoteSendSize, r.Params.RemoteRecvSize = -1, -1, -1, -1
	lr, err := c.dataPhase(ctx, tg, instance, events, remote, family, nil, r)
	if err != nil {
		return nil, err
	}
	r.Remote = SideResults{Retrans: -1, SndBuf: -1, RcvBuf: -1}
	lr.finish(c, r)
	return r, nil
}

// The services a test without a control connection goes to when -P names
// no port: what the netserver's side of the test would do.
const (
	echoPort    = 7  // request/response
	discardPort = 9  // this end sends
	chargenPort = 19 // this end receives
)

func noControlPort(test string) int {
	switch test {
	case TCPStream, UDPStream:
		return discardPort
	case TCPMaerts:
		return chargenPort
	}
	return echoPort
}

// localRun is what this end measured in its data phase.
type localRun struct {
	t          tally
	local      SideResults
	cpuA, cpuB cpustat.Sample
	ifname     string
	ifA, ifB   IfaceCounters
}

// dataPhase runs this end's data loop against remote, with the interim
// reports, the cut-off, and this end's CPU and interface samples.
func (c *Config) dataPhase(ctx context.Context, tg Target, instance int, events func(Interim), remote netip.AddrPort, family string, recvSock *sock, r *Result) (*localRun, error) {
	p := phase{lossAfter: time.Duration(c.UDPTimeout) * time.Second, pace: newPacer(c.LocalInterval, c.LocalBurst),
		bufs: bufLayout{sendAlign: c.LocalSendAlign, sendOffset: c.LocalSendOffset, recvAlign: c.LocalRecvAlign, recvOffset: c.LocalRecvOffset,
			sendWidth: c.SendWidth, recvWidth: c.RecvWidth, fill: c.fill}}
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
	lr := &localRun{}
	lr.cpuA, _ = cpustat.Take()
	var err error
	lr.t, lr.local, err = c.runLocal(remote, family, recvSock, &p, r, &lr.ifname, &lr.ifA)
	lr.cpuB, _ = cpustat.Take()
	lr.ifB, _ = ReadIface(lr.ifname)
	stopInterim()
	if err != nil {
		if cutOff.Load() {
			return nil, fmt.Errorf("%s data phase: the netserver stopped answering; cut off after %v", c.Test, limit)
		}
		return nil, fmt.Errorf("%s data phase: %w", c.Test, err)
	}
	c.debugf("data phase over: %d bytes, %d calls, %d transactions in %.3f s", lr.t.Bytes, lr.t.Messages, lr.t.Transactions, lr.t.elapsed())
	return lr, nil
}

// finish puts this end's measurements in the result and computes it.
func (lr *localRun) finish(c *Config, r *Result) {
	t := lr.t
	r.Local = lr.local
	r.Local.Bytes, r.Local.Messages, r.Local.Transactions, r.Local.Elapsed = t.Bytes, t.Messages, t.Transactions, t.elapsed()
	r.Local.Host = hostInfo()
	if c.LocalCPU || c.RemoteCPU {
		u := cpustat.Between(lr.cpuA.First(c.NumCPUs), lr.cpuB.First(c.NumCPUs))
		u.Process = cpustat.Between(lr.cpuA, lr.cpuB).Process
		r.Local.CPU = &u
	}
	if lr.ifname != "" {
		r.Local.Iface = ifaceDelta(lr.ifname, lr.ifA, lr.ifB, lr.cpuB.At.Sub(lr.cpuA.At).Seconds())
	}
	r.compute(c, t)
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

// bindReceiver opens this end's socket for a UDP test where the
// netserver sends, bound before the request names it: at -L's data
// address and -P's port, or at the control connection's address.
func (c *Config) bindReceiver(ctx context.Context, family string, ctlLocal net.Addr) (*sock, netip.AddrPort, error) {
	ip, _ := netip.AddrFromSlice(localIP(ctlLocal))
	ip = ip.Unmap()
	if c.LocalDataHost != "" {
		ap, err := resolveData(ctx, c.LocalDataHost, 0, family)
		if err != nil {
			return nil, netip.AddrPort{}, err
		}
		ip = ap.Addr()
	}
	domain := domainFor(ip, family)
	fd, err := newDataFD(domain, unix.SOCK_DGRAM, c.localSockOpts(family))
	if err != nil {
		return nil, netip.AddrPort{}, err
	}
	if err := bindData(fd, newEndpoint(netip.AddrPortFrom(ip, uint16(c.LocalDataPort)), domain)); err != nil {
		unix.Close(fd)
		return nil, netip.AddrPort{}, err
	}
	return &sock{fd: fd}, localAddr(fd), nil
}

// localSockOpts are this end's data socket options.
func (c *Config) localSockOpts(family string) sockOpts {
	return sockOpts{snd: c.LocalSndBuf, rcv: c.LocalRcvBuf, tos: c.LocalTOS, cong: c.LocalCong, noDelay: c.LocalNoDelay, family: family,
		prio: c.LocalPrio, keep: c.KeepAlive, cork: c.Cork, fastOpen: c.FastOpen, mss: c.LocalMSS, pacing: c.LocalPacingRate}
}

// connector is how this end opens its data connections to remote.
func (c *Config) connector(remote netip.AddrPort, family string) (*connector, error) {
	domain := domainFor(remote.Addr(), family)
	k := &connector{typ: unix.SOCK_STREAM, remote: newEndpoint(remote, domain), opts: c.localSockOpts(family), limit: connectTimeout}
	if isUDP(c.Test) {
		k.typ = unix.SOCK_DGRAM
	}
	if c.LocalDataPort > 0 || c.LocalDataHost != "" {
		ip := netip.IPv4Unspecified()
		if domain == unix.AF_INET6 {
			ip = netip.IPv6Unspecified()
		}
		if c.LocalDataHost != "" {
			ap, err := resolveData(context.Background(), c.LocalDataHost, 0, family)
			if err != nil {
				return nil, err
			}
			ip = ap.Addr()
		}
		port := c.LocalDataPort
		if c.Test == TCPCRR {
			port = 0 // one port cannot serve every connection
		}
		k.local = newEndpoint(netip.AddrPortFrom(ip, uint16(port)), domain)
	}
	return k, nil
}

// runLocal opens this end's data socket and runs the test's loop.
func (c *Config) runLocal(remote netip.AddrPort, family string, recvSock *sock, p *phase, r *Result, ifname *string, ifA *IfaceCounters) (tally, SideResults, error) {
	local := SideResults{Retrans: -1}
	k, err := c.connector(remote, family)
	if err != nil {
		return tally{}, local, err
	}
	// What the first data socket tells: its address, interface and buffers.
	first := func(s *sock) {
		la := localAddr(s.fd)
		*ifname = ifaceFor(net.IP(la.Addr().AsSlice()))
		*ifA, _ = ReadIface(*ifname)
		r.LocalAddr = la.String()
		local.SndBuf, local.RcvBuf = s.bufSizes()
		r.Params.LocalSndBuf, r.Params.LocalRcvBuf = local.SndBuf, local.RcvBuf
		c.debugf("data connection from %s to %s, socket buffers send %d receive %d", la, remote, local.SndBuf, local.RcvBuf)
	}
	if c.Test == TCPCRR {
		r.Params.LocalSendWidth, r.Params.LocalRecvWidth = rrWidth(c.SendWidth, c.ReqSize), rrWidth(c.RecvWidth, c.RespSize)
		// The last connection's TCP_INFO, before it closes, as netperf's
		// data socket's at the end of its test.
		last := func(s *sock) {
			local.Retrans, local.CongControl = s.tcpInfo()
			r.MSS = s.mss()
			if c.DumpTCPInfo || c.Debug > 1 {
				c.dumpTCPInfo(s)
			}
		}
		t, err := crrClient(k, c.ReqSize, c.RespSize, c.Duration(), c.Count(), p, true, first, last)
		return t, local, err
	}
	s := recvSock
	if s != nil {
		// Datagrams from the netserver's data socket alone.
		if err := s.connect(k.remote, connectTimeout, &p.stop); err != nil {
			return tally{}, local, fmt.Errorf("data socket: connect to %s: %w", remote, err)
		}
	} else {
		s = &sock{fd: -1}
		if err := k.open(s, &p.stop); err != nil {
			return tally{}, local, fmt.Errorf("data connection: %w", err)
		}
		defer s.Close()
	}
	first(s)
	var t tally
	switch c.Test {
	case TCPStream:
		size := orDefault(c.SendSize, local.SndBuf)
		r.Params.SendSize, r.Params.RecvSize = size, orDefault(c.RemoteRecvSize, r.Params.RemoteRcvBuf)
		if r.Params.RemoteRecvSize > 0 {
			r.Params.RecvSize = r.Params.RemoteRecvSize
		}
		width := streamWidth(c.SendWidth, local.SndBuf, size)
		r.Params.LocalSendWidth = width
		t, err = streamSend(s, size, width, c.Duration(), c.Count(), p)
	case TCPMaerts:
		size := orDefault(c.RecvSize, local.RcvBuf)
		r.Params.RecvSize, r.Params.SendSize = size, orDefault(c.RemoteSendSize, r.Params.RemoteSndBuf)
		if r.Params.RemoteSendSize > 0 {
			r.Params.SendSize = r.Params.RemoteSendSize
		}
		width := streamWidth(c.RecvWidth, local.RcvBuf, size)
		r.Params.LocalRecvWidth = width
		if c.NoControl {
			defer p.endAfter(c.Duration())() // chargen never ends
		}
		t, err = streamRecv(s, size, width, p)
	case TCPRR:
		r.Params.LocalSendWidth, r.Params.LocalRecvWidth = rrWidth(c.SendWidth, c.ReqSize), rrWidth(c.RecvWidth, c.RespSize)
		t, err = rrClient(s, c.ReqSize, c.RespSize, c.Duration(), c.Count(), c.FirstBurst, p, true)
	case UDPStream:
		size := c.SendSize
		if size == 0 {
			size = DefaultUDPSize
		}
		r.Params.SendSize, r.Params.RecvSize = size, orDefault(c.RemoteRecvSize, maxUDP)
		width := streamWidth(c.SendWidth, local.SndBuf, size)
		r.Params.LocalSendWidth = width
		t, err = udpSend(s, size, width, c.Duration(), c.Count(), p)
	case UDPRR:
		r.Params.LocalSendWidth, r.Params.LocalRecvWidth = rrWidth(c.SendWidth, c.ReqSize), 1
		t, err = udpRRClient(s, c.ReqSize, c.RespSize, c.Duration(), c.Count(), c.FirstBurst, p, true)
	case UDPMaerts:
		// netperf's receive size is its socket buffer's.
		r.Params.RecvSize, r.Params.SendSize = local.RcvBuf, orDefault(c.RemoteSendSize, DefaultUDPSize)
		if r.Params.RemoteSendSize > 0 {
			r.Params.SendSize = r.Params.RemoteSendSize
		}
		r.Params.LocalRecvWidth = 1
		// The netserver ends with zero-length datagrams; should they be
		// lost, the length and a second.
		defer p.endAfter(c.Duration() + time.Second)()
		t, err = udpRecv(s, maxUDP, p)
	default:
		return tally{}, local, fmt.Errorf("unknown test %s", c.Test)
	}
	if isUDP(c.Test) {
		if c.Test != UDPMaerts {
			s.endUDP()
		}
	} else {
		local.Retrans, local.CongControl = s.tcpInfo()
		r.MSS = s.mss()
		if c.DumpTCPInfo || c.Debug > 1 {
			c.dumpTCPInfo(s)
		}
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
	case TCPStream, TCPMaerts, UDPStream, UDPMaerts:
		recv, send := &r.Remote, &r.Local
		if c.Test == TCPMaerts || c.Test == UDPMaerts {
			recv, send = &r.Local, &r.Remote
		}
		if c.NoControl {
			recv = &r.Local // nothing else was measured: what was sent
		}
		el := recv.Elapsed
		switch {
		case c.Test == UDPStream:
			el = r.Elapsed // the sender's clock, as netperf: datagrams have no FIN
			r.SendRate = float64(send.Bytes) * 8 / el
		case c.Test == UDPMaerts && send.Elapsed > 0:
			r.SendRate = float64(send.Bytes) * 8 / send.Elapsed
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
