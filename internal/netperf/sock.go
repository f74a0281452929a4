package netperf

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sock is a data socket used with blocking system calls, one per call, as C
// netperf does: the hot loops pay for no poller wake-ups. SO_RCVTIMEO and
// SO_SNDTIMEO bound each call so that a loop can notice that the test is
// over or the peer has vanished.
type sock struct {
	fd int
	// raw: the loop holds a raw slot and makes raw calls (see rawRead).
	raw  bool
	want rawNeed // why the loop wants raw calls, if it does
	// waiting: a latency loop counted in rrWaiting, without a slot yet.
	waiting bool
	// calls counts calls since the loop last yielded or looked for a slot.
	calls   uint32
	noYield bool // see phase.locked
}

func (s *sock) readOnce(fd int, b []byte) (int, error) {
	if s.beforeCall() {
		return rawRead(fd, b)
	}
	return unix.Read(fd, b)
}

func (s *sock) writeOnce(fd int, b []byte) (int, error) {
	if s.beforeCall() {
		return rawWrite(fd, b)
	}
	return unix.Write(fd, b)
}

// pollInterval bounds one blocking call.
const pollInterval = 500 * time.Millisecond

// boundCalls bounds each blocking call on fd to pollInterval.
func boundCalls(fd int) {
	tv := unix.NsecToTimeval(pollInterval.Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
}

func (s *sock) Close() error { return unix.Close(s.fd) }

// CloseWrite sends FIN: the receiver's read returns 0.
func (s *sock) CloseWrite() error { return unix.Shutdown(s.fd, unix.SHUT_WR) }

// wakeReader ends a datagram socket's blocked and future receives at once:
// they return no data and no sender. The kernel does this for a shutdown
// even on an unconnected UDP socket, though it reports ENOTCONN.
// Equivalent to: shutdown(fd, SHUT_RD)
func (s *sock) wakeReader() { _ = unix.Shutdown(s.fd, unix.SHUT_RD) }

// errStopped ends a loop whose test was stopped from outside.
var errStopped = errors.New("stopped")

// rawRead and rawWrite skip the runtime's system-call bookkeeping. A read
// that blocks for a round trip (tens of µs) otherwise lets the runtime hand
// this thread's processor to another thread and take it back afterwards:
// two context switches per transaction, which is most of the gap to a C
// ping-pong tool. Each call is bounded by SO_RCVTIMEO/SO_SNDTIMEO.
//
// They are recvfrom and sendto rather than read and write, as in sockperf:
// the socket calls skip the file layer's per-call checks, about 0.2 µs of a
// 21 µs round trip on a veth pair.
func rawRead(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rawWrite(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// read reads once, retrying timeouts until stop is set.
func (s *sock) read(b []byte, stop *atomic.Bool) (int, error) {
	for {
		n, err := s.readOnce(s.fd, b)
		if err == nil {
			return n, nil
		}
		if interrupted(err) {
			if idle(stop) {
				return 0, errStopped
			}
			continue
		}
		return 0, err
	}
}

// interrupted reports a call that ended without data: its timeout ran out
// (EAGAIN) or a signal came (EINTR). Calls with a timeout are not restarted
// after a signal, and the runtime signals a goroutine it believes has run
// too long (every raw call looks like that) about every 10 ms, so EINTR
// must count as a chance to stop, not a retry, or the loop never ends.
func interrupted(err error) bool { return err == unix.EAGAIN || err == unix.EINTR }

// idle is called when a bounded call timed out. It yields first: a loop
// of raw calls never gives up its processor otherwise, and the goroutine
// that would set stop may be queued behind it.
func idle(stop *atomic.Bool) bool {
	runtime.Gosched()
	return stop.Load()
}

// readFull reads exactly len(b) bytes; io.EOF-like end is reported as n < len(b), nil err.
func (s *sock) readFull(b []byte, stop *atomic.Bool) (int, error) {
	got := 0
	for got < len(b) {
		n, err := s.read(b[got:], stop)
		if err != nil {
			return got, err
		}
		if n == 0 {
			return got, nil
		}
		got += n
	}
	return got, nil
}

// write writes all of b, retrying timeouts until one of stops is set.
func (s *sock) write(b []byte, stops ...*atomic.Bool) (int, error) {
	done := 0
	for done < len(b) {
		n, err := s.writeOnce(s.fd, b[done:])
		if n > 0 {
			done += n
		}
		switch {
		case err == nil:
		case interrupted(err):
			for _, stop := range stops {
				if idle(stop) {
					return done, errStopped
				}
			}
		default:
			return done, err
		}
	}
	return done, nil
}

// recvfrom reads one datagram.
func (s *sock) recvfrom(b []byte, stop *atomic.Bool) (int, unix.Sockaddr, error) {
	for {
		n, from, err := unix.Recvfrom(s.fd, b, 0)
		if err == nil && from == nil && stop.Load() {
			return 0, nil, errStopped // woken by wakeReader: every datagram has a sender
		}
		if err == nil {
			return n, from, nil
		}
		if interrupted(err) {
			if idle(stop) {
				return 0, nil, errStopped
			}
			continue
		}
		return 0, nil, err
	}
}

// bufSizes reads the granted socket buffer sizes.
func (s *sock) bufSizes() (snd, rcv int) {
	snd, _ = unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	rcv, _ = unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	return snd, rcv
}

// sockOpts are a data socket's options: buffers (-s, -S), TOS (-Y),
// TCP_NODELAY (-D), congestion control (-K), TCP_CORK (-C), fast open (-F).
type sockOpts struct {
	snd, rcv int    // 0: the system's default (and autotuning)
	tos      int    // -1: leave it
	cong     string // "": the system's
	noDelay  bool
	family   string // "4", "6" or "" for either
	prio     int    // SO_PRIORITY (-y), -1 to leave it
	keep     bool   // SO_KEEPALIVE (global -S)
	cork     bool   // TCP_CORK (test -C): this end's sends wait for full segments
	// fastOpen: TCP fast open (test -F); on a client's socket its first
	// data rides in the SYN, on a listener it takes such data.
	fastOpen bool
	mss      int // TCP_MAXSEG (test -G), 0 to leave it
	// pacing: SO_MAX_PACING_RATE in bytes/s (test -q), 0 to leave it;
	// TCP paces itself to it without the fq qdisc.
	pacing int
}

// applyMarks sets the TOS and the priority alone, which an accepted
// socket does not inherit from its listener on every kernel (the
// priority on none), when they are asked for.
func (o sockOpts) applyMarks(fd int, v6 bool) error {
	if o.tos < 0 && o.prio < 0 {
		return nil
	}
	return sockOpts{tos: o.tos, prio: o.prio}.applyTo(fd, v6, false)
}

// applyTo sets the options on a new socket, before bind, connect or
// listen, where TCP's window scale is decided. v6 and stream say what the
// socket is, so that no option is looked up per connection.
func (o sockOpts) applyTo(fd int, v6, stream bool) error {
	set := func(what string, level, opt, v int) error {
		if err := unix.SetsockoptInt(fd, level, opt, v); err != nil {
			return fmt.Errorf("setsockopt %s %d: %w", what, v, err)
		}
		return nil
	}
	type opt struct {
		on          bool
		what        string
		level, name int
		v           int
	}
	tos := opt{o.tos >= 0, "IP_TOS", unix.IPPROTO_IP, unix.IP_TOS, o.tos}
	if v6 {
		tos = opt{o.tos >= 0, "IPV6_TCLASS", unix.IPPROTO_IPV6, unix.IPV6_TCLASS, o.tos}
	}
	opts := []opt{
		{o.snd > 0, "SO_SNDBUF", unix.SOL_SOCKET, unix.SO_SNDBUF, o.snd},
		{o.rcv > 0, "SO_RCVBUF", unix.SOL_SOCKET, unix.SO_RCVBUF, o.rcv},
		{o.keep, "SO_KEEPALIVE", unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		// The TOS before the priority: setting the TOS sets the
		// priority from it.
		tos,
		{o.prio >= 0, "SO_PRIORITY", unix.SOL_SOCKET, unix.SO_PRIORITY, o.prio},
		{stream && o.noDelay, "TCP_NODELAY", unix.IPPROTO_TCP, unix.TCP_NODELAY, 1},
		{stream && o.cork, "TCP_CORK", unix.IPPROTO_TCP, unix.TCP_CORK, 1},
		{stream && o.mss > 0, "TCP_MAXSEG", unix.IPPROTO_TCP, unix.TCP_MAXSEG, o.mss},
		{o.pacing > 0, "SO_MAX_PACING_RATE", unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE, o.pacing},
		// The client's connect waits for its first write, whose data
		// rides in the SYN: what netperf's sendto(MSG_FASTOPEN) does.
		{stream && o.fastOpen, "TCP_FASTOPEN_CONNECT", unix.IPPROTO_TCP, unix.TCP_FASTOPEN_CONNECT, 1},
	}
	for _, x := range opts {
		if x.on {
			if err := set(x.what, x.level, x.name, x.v); err != nil {
				return err
			}
		}
	}
	if stream && o.cong != "" {
		if err := unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, o.cong); err != nil {
			return fmt.Errorf("congestion control %q: %w", o.cong, err)
		}
	}
	return nil
}

// tcpInfo reads a TCP socket's retransmissions and congestion control;
// -1 and "" where they cannot be read (UDP).
func (s *sock) tcpInfo() (retrans int64, cong string) {
	retrans = -1
	if ti, err := unix.GetsockoptTCPInfo(s.fd, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
		retrans = int64(ti.Total_retrans)
	}
	if c, err := unix.GetsockoptString(s.fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION); err == nil {
		cong = strings.TrimRight(c, "\x00")
	}
	return retrans, cong
}

// endUDP sends netperf's end of a UDP test: three zero-length datagrams,
// which end the netserver's loop without waiting for its timer.
func (s *sock) endUDP() {
	for i := 0; i < 3; i++ {
		_, _ = unix.Write(s.fd, nil)
	}
}

// mss is a TCP socket's maximum segment size, or -1.
func (s *sock) mss() int {
	// TCP_INFO's send MSS is the connection's, options taken off, in any
	// state; TCP_MAXSEG gives the value asked with -G instead once the
	// socket has reached CLOSE, which a stream's end may already have.
	if ti, err := unix.GetsockoptTCPInfo(s.fd, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil && ti.Snd_mss > 0 {
		return int(ti.Snd_mss)
	}
	v, err := unix.GetsockoptInt(s.fd, unix.IPPROTO_TCP, unix.TCP_MAXSEG)
	if err != nil {
		return -1
	}
	return v
}

func network(proto, family string) string {
	return proto + family // "tcp", "tcp4", "udp6", ...
}

func localIP(a net.Addr) net.IP {
	switch v := a.(type) {
	case *net.TCPAddr:
		return v.IP
	case *net.UDPAddr:
		return v.IP
	}
	return nil
}
