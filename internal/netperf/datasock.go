package netperf

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Data sockets are made, connected, bound and accepted with system calls on
// raw descriptors, as C netperf makes them, not through Go's net package:
// a TCP_CRR test opens a connection per transaction, and Go's dialer (a
// non-blocking connect, the poller's registration and wake-up, a
// descriptor duplicated and made blocking again for the data loop) costs
// several times the system calls of the transaction itself. The sockets
// are blocking from the start, each call bounded by pollInterval.

// endpoint is a socket address, kept in both of the forms the kernel is
// handed it in.
type endpoint struct {
	ap     netip.AddrPort
	domain int // AF_INET or AF_INET6
	sa     unix.Sockaddr
	raw4   unix.RawSockaddrInet4
	raw6   unix.RawSockaddrInet6
}

// newEndpoint is ap for a socket of the domain; an IPv4 address in an
// IPv6 socket is v4-mapped.
func newEndpoint(ap netip.AddrPort, domain int) *endpoint {
	e := &endpoint{ap: ap, domain: domain}
	port := ap.Port()
	if domain == unix.AF_INET {
		a := ap.Addr().Unmap().As4()
		e.sa = &unix.SockaddrInet4{Port: int(port), Addr: a}
		e.raw4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a}
		putPort(&e.raw4.Port, port)
		return e
	}
	a := ap.Addr().As16()
	var zone uint32
	if z := ap.Addr().Zone(); z != "" {
		if ifi, err := net.InterfaceByName(z); err == nil {
			zone = uint32(ifi.Index)
		}
	}
	e.sa = &unix.SockaddrInet6{Port: int(port), Addr: a, ZoneId: zone}
	e.raw6 = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a, Scope_id: zone}
	putPort(&e.raw6.Port, port)
	return e
}

// putPort writes a port in network order.
func putPort(dst *uint16, port uint16) {
	b := (*[2]byte)(unsafe.Pointer(dst))
	b[0], b[1] = byte(port>>8), byte(port)
}

// raw is the address as connect(2) takes it.
func (e *endpoint) raw() (unsafe.Pointer, uintptr) {
	if e.domain == unix.AF_INET {
		return unsafe.Pointer(&e.raw4), unsafe.Sizeof(e.raw4)
	}
	return unsafe.Pointer(&e.raw6), unsafe.Sizeof(e.raw6)
}

// domainFor is the socket domain for a data connection to addr over
// family ("4", "6" or either).
func domainFor(addr netip.Addr, family string) int {
	if family == "6" || family == "" && addr.Is6() && !addr.Is4In6() {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

// resolveData is the data connection's remote end: host resolved once
// for the whole test, in family when one is asked for.
func resolveData(ctx context.Context, host string, port int, family string) (netip.AddrPort, error) {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		ips, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip"+family, host)
		if lerr != nil || len(ips) == 0 {
			return netip.AddrPort{}, fmt.Errorf("data address %s: %v", host, lerr)
		}
		ip = ips[0]
	}
	if family == "4" && !ip.Unmap().Is4() {
		return netip.AddrPort{}, fmt.Errorf("data address %s is not an IPv4 address", host)
	}
	return netip.AddrPortFrom(ip, uint16(port)), nil
}

// newDataFD makes a blocking socket with the test's options, each call
// on it bounded by pollInterval.
func newDataFD(domain, typ int, o sockOpts) (int, error) {
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	if err := o.applyTo(fd, domain == unix.AF_INET6, typ == unix.SOCK_STREAM); err != nil {
		unix.Close(fd)
		return -1, err
	}
	boundCalls(fd)
	return fd, nil
}

// bindData binds fd to a local address, reusable at once as netperf's are.
func bindData(fd int, local *endpoint) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return os.NewSyscallError("setsockopt SO_REUSEADDR", err)
	}
	if err := unix.Bind(fd, local.sa); err != nil {
		return fmt.Errorf("bind %s: %w", local.ap, err)
	}
	return nil
}

// connector opens the client's data connections: one for most tests, one
// per transaction for TCP_CRR.
type connector struct {
	typ           int // SOCK_STREAM or SOCK_DGRAM
	remote, local *endpoint
	opts          sockOpts
	limit         time.Duration // for the connection to be made
}

// connectTimeout is how long a data connection may take to be made.
const connectTimeout = 10 * time.Second

// open makes a socket and connects it, into s.fd; the calls are raw when
// s holds a raw slot.
func (k *connector) open(s *sock, stop *atomic.Bool) error {
	fd, err := newDataFD(k.remote.domain, k.typ, k.opts)
	if err != nil {
		return err
	}
	if k.local != nil {
		if err := bindData(fd, k.local); err != nil {
			unix.Close(fd)
			return err
		}
	}
	s.fd = fd
	if err := s.connect(k.remote, k.limit, stop); err != nil {
		s.closeFD()
		return fmt.Errorf("connect to %s: %w", k.remote.ap, err)
	}
	return nil
}

// connect connects s.fd to e. A blocking connect returns EINPROGRESS once
// the send timeout has passed; called again it waits on, and the loop
// looks at stop in between.
func (s *sock) connect(e *endpoint, limit time.Duration, stop *atomic.Bool) error {
	var deadline time.Time
	for {
		err := s.connectOnce(e)
		switch {
		case err == nil, err == unix.EISCONN:
			return nil
		case err != unix.EINPROGRESS && err != unix.EALREADY && err != unix.EINTR:
			return err
		case stop != nil && stop.Load():
			return errStopped
		case deadline.IsZero():
			deadline = time.Now().Add(limit)
		case time.Now().After(deadline):
			return unix.ETIMEDOUT
		}
	}
}

func (s *sock) connectOnce(e *endpoint) error {
	if s.beforeCall() {
		p, n := e.raw()
		if _, _, errno := unix.RawSyscall(unix.SYS_CONNECT, uintptr(s.fd), uintptr(p), n); errno != 0 {
			return errno
		}
		return nil
	}
	return unix.Connect(s.fd, e.sa)
}

// closeFD closes s.fd, raw when the loop makes raw calls.
func (s *sock) closeFD() {
	if s.fd < 0 {
		return
	}
	if s.raw {
		unix.RawSyscall(unix.SYS_CLOSE, uintptr(s.fd), 0, 0)
	} else {
		unix.Close(s.fd)
	}
	s.fd = -1
}

// acceptFrom takes one connection from the listening socket ln; EAGAIN
// once ln's receive timeout has passed, EINVAL once it was shut down (see
// serverData.wake). The accepted socket inherits the listener's options
// and call bounds, and is blocking.
func (s *sock) acceptFrom(ln int) (int, error) {
	var fd uintptr
	var errno unix.Errno
	if s.beforeCall() {
		fd, _, errno = unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(ln), 0, 0, unix.SOCK_CLOEXEC, 0, 0)
	} else {
		fd, _, errno = unix.Syscall6(unix.SYS_ACCEPT4, uintptr(ln), 0, 0, unix.SOCK_CLOEXEC, 0, 0)
	}
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// listenData makes the netserver's data socket: a TCP listener or a bound
// UDP socket, at ip (the wildcard of the family when ip is not of it) and
// port (0: any). A listener with fastOpen takes data in the SYN (a
// queue of five, as netserver's).
func listenData(typ int, family string, ip netip.Addr, port int, o sockOpts) (fd, boundPort int, err error) {
	if ip.IsValid() && family == "" {
		family = "6"
		if ip.Unmap().Is4() {
			family = "4"
		}
	}
	domain := unix.AF_INET6
	if family == "4" {
		domain = unix.AF_INET
	}
	if !ip.IsValid() || domain == unix.AF_INET && !ip.Unmap().Is4() || domain == unix.AF_INET6 && ip.Is4() {
		ip = netip.IPv6Unspecified()
		if domain == unix.AF_INET {
			ip = netip.IPv4Unspecified()
		}
	}
	fastOpen := o.fastOpen
	o.fastOpen = false // TCP_FASTOPEN_CONNECT is the client's
	if fd, err = newDataFD(domain, typ, o); err != nil {
		return -1, 0, err
	}
	fail := func(err error) (int, int, error) {
		unix.Close(fd)
		return -1, 0, err
	}
	if err := bindData(fd, newEndpoint(netip.AddrPortFrom(ip, uint16(port)), domain)); err != nil {
		return fail(err)
	}
	if typ == unix.SOCK_STREAM {
		if fastOpen {
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_FASTOPEN, 5); err != nil {
				return fail(os.NewSyscallError("setsockopt TCP_FASTOPEN", err))
			}
		}
		if err := unix.Listen(fd, 128); err != nil {
			return fail(os.NewSyscallError("listen", err))
		}
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fail(os.NewSyscallError("getsockname", err))
	}
	return fd, sockaddrPort(sa), nil
}

func sockaddrPort(sa unix.Sockaddr) int {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return a.Port
	case *unix.SockaddrInet6:
		return a.Port
	}
	return 0
}

// localAddr is the address a socket is bound to, "" when unknown.
func localAddr(fd int) netip.AddrPort {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return netip.AddrPort{}
}
