package netperf

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// netperf's command line, as netperf 2.7 reads it: global options, then
// "--", then the test's. Every option netperf takes is either read with
// its meaning or refused as not supported; none is ignored.

// optKind says what follows an option letter.
type optKind int

const (
	noValue       optKind = iota
	value                 // the next argument, or the rest of this one (-l10)
	optionalValue         // the next argument when it does not start with '-' (-k, -o, -O)
	optionalRate          // the next argument when it starts with a digit (-c, -C)
	refused               // netperf has it; vnet netperf does not
)

// globalOpts are netperf 2.7's global options (netsh.c).
var globalOpts = map[byte]optKind{
	'a': value, 'A': value, 'B': value, 'c': optionalRate, 'C': optionalRate, 'D': value, 'f': value, 'F': value, 'h': noValue,
	'H': value, 'i': value, 'I': value, 'j': noValue, 'l': value, 'L': value, 'n': value, 'o': value, 'O': value, 'p': value,
	'P': value, 'r': noValue, 's': value, 'S': noValue, 't': value, 'T': value, 'v': value, 'V': noValue, 'y': value, 'Y': value,
	'Z': value, '4': noValue, '6': noValue, 'd': noValue, 'N': noValue, 'w': value, 'b': value, 'W': value,
	// Buffer dirtying, which netperf has only when built with
	// --enable-dirty.
	'k': refused, 'K': refused,
}

// testOpts are the OMNI test's options, which the classic tests share in
// netperf 2.7 (nettest_omni.c).
var testOpts = map[byte]optKind{
	'4': noValue, '6': noValue, 'c': noValue, 'd': value, 'D': noValue, 'e': value, 'h': noValue, 'H': value, 'k': optionalValue,
	'K': value, 'L': value, 'm': value, 'M': value, 'n': noValue, 'N': noValue, 'o': optionalValue, 'O': optionalValue, 'P': value,
	'r': value, 's': value, 'S': value, 't': value, 'T': value, 'u': value, 'b': value, 'C': noValue, 'F': noValue, 'W': value,
	'w': value, 'G': value, 'q': value,
	// Deferred accept, IP_PKTINFO, path MTU discovery, socket debugging,
	// a check interval (netperf 2.7 no longer has it), write(), parallel
	// connections, multicast TTL, port ranges, routing, never giving up
	// and copy avoidance.
	'a': refused, 'B': refused, 'f': refused, 'g': refused, 'i': refused, 'I': refused, 'j': refused, 'l': refused,
	'p': refused, 'R': refused, 'U': refused, 'V': refused,
}

// ParseArgs reads netperf's command line. Values may be glued to their
// flag (-l10) or follow it.
func ParseArgs(args []string) (*Config, error) {
	c := &Config{LocalTOS: -1, RemoteTOS: -1, LocalPrio: -1, RemotePrio: -1, ControlPort: DefaultPort, Length: 10, TestName: TCPStream,
		Banner: true, Instances: 1, Verbosity: 1, LocalSendAlign: 8, LocalRecvAlign: 8, RemoteSendAlign: 8, RemoteRecvAlign: 8}
	global, testArgs := args, []string(nil)
	for i, a := range args {
		if a == "--" {
			global, testArgs = args[:i], args[i+1:]
			break
		}
	}
	g := globalState{family: ""}
	if err := scan(global, globalOpts, "", func(flag byte, val string) error { return c.global(&g, flag, val) }); err != nil {
		return nil, err
	}
	if c.Version {
		return c, nil
	}
	// A burst without an interval is a burst every millisecond, as in
	// netperf.
	if c.LocalBurst > 0 && c.LocalInterval == 0 {
		c.LocalInterval = time.Millisecond
	}
	if c.RemoteBurst > 0 && c.RemoteInterval == 0 {
		c.RemoteInterval = time.Millisecond
	}
	shape, err := defaultShape(c.TestName)
	if err != nil {
		return nil, err
	}
	if shape.rr {
		c.ReqSize, c.RespSize = 1, 1
	}
	if err := scan(testArgs, testOpts, "-", func(flag byte, val string) error { return c.testOption(&g, &shape, flag, val) }); err != nil {
		return nil, err
	}
	if c.ListSelectors {
		return c, nil
	}
	if c.Test, err = shape.test(); err != nil {
		return nil, err
	}
	if c.IsRR() && shape.omni {
		c.ReqSize, c.RespSize = max(c.ReqSize, 1), max(c.RespSize, 1)
	}
	if c.TestName == OMNI && c.Output == "" {
		c.Output = OutputHuman // an OMNI test prints its default columns
	}
	if len(c.Targets) == 0 {
		c.Targets = []Target{{Host: "localhost"}}
	}
	for i := range c.Targets {
		if c.Targets[i].Family == "" {
			c.Targets[i].Family = g.family
		}
	}
	if g.confSet || g.iterSet {
		c.finishConfidence(g)
	}
	if c.Units == 0 {
		c.Units = 'm'
		if c.IsRR() {
			c.Units = 'x'
		}
	} else if c.Units == 'x' && !c.IsRR() {
		c.Units = 'm' // as netperf: transactions mean nothing to a stream
	}
	if c.Output != "" && len(c.Selectors) == 0 {
		c.Selectors = defaultSelectors(c)
	}
	return c, c.check()
}

// globalState is what the global options leave for later.
type globalState struct {
	family           string
	confSet, iterSet bool
	maxIter, minIter int
}

func (c *Config) global(g *globalState, flag byte, val string) error {
	switch flag {
	case 'h':
		return errHelp
	case 'V':
		c.Version = true
	case 'a':
		return parseBounded("-a", val, maxAlign, &c.LocalSendAlign, &c.LocalRecvAlign)
	case 'A':
		return parseBounded("-A", val, maxAlign, &c.RemoteSendAlign, &c.RemoteRecvAlign)
	case 'o':
		return parseBounded("-o", val, maxOffset, &c.LocalSendOffset, &c.LocalRecvOffset)
	case 'O':
		return parseBounded("-O", val, maxOffset, &c.RemoteSendOffset, &c.RemoteRecvOffset)
	case 'B':
		c.Brand = val
	case 'b':
		return parsePacing("-b", val, func(side int, s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || n > maxBurst {
				return fmt.Errorf("-b %s: %q is not a burst of operations (0..%d)", val, s, maxBurst)
			}
			if side == 0 {
				c.LocalBurst = n
			} else {
				c.RemoteBurst = n
			}
			return nil
		})
	case 'c':
		c.LocalCPU = true // a rate after it is /proc/stat's to ignore: it needs no calibration
	case 'C':
		c.RemoteCPU = true
	case 'd':
		c.Debug++
	case 'D':
		return c.parseDemo(val)
	case 'f':
		if err := c.Units.UnmarshalText([]byte(val)); err != nil {
			return fmt.Errorf("-f %s: want one of k m g K M G x", val)
		}
	case 'F':
		l, r, _ := strings.Cut(val, ",")
		if len(r) > 31 {
			return fmt.Errorf("-F %s: the netserver's fill file name is at most 31 characters", val)
		}
		c.FillFile, c.RemoteFill = l, r
		if l != "" {
			f, err := os.Open(l)
			if err != nil {
				return fmt.Errorf("-F %s: %w", val, err)
			}
			defer f.Close()
			// One buffer's worth (netperf reads a buffer's size from it);
			// the buffers repeat it.
			c.fill = make([]byte, 64<<10)
			n, err := io.ReadFull(f, c.fill)
			if n == 0 {
				return fmt.Errorf("-F %s: nothing to read: %v", val, err)
			}
			c.fill = c.fill[:n]
		}
	case 'H':
		host, fam, _ := strings.Cut(val, ",")
		f, err := parseFamily("-H", fam)
		if err != nil {
			return err
		}
		if host == "" {
			g.family = f // -H ,6: only the family
			for i := range c.Targets {
				c.Targets[i].Family = f
			}
			return nil
		}
		c.Targets = append(c.Targets, Target{Host: host, Family: f})
	case 'L':
		host, fam, _ := strings.Cut(val, ",")
		f, err := parseFamily("-L", fam)
		if err != nil {
			return err
		}
		if host != "" {
			c.LocalHost = host
		}
		if f != "" {
			g.family = f
		}
	case '4':
		g.family = "4"
	case '6':
		g.family = "6"
	case 'i':
		mx, mn, _ := strings.Cut(val, ",")
		var err error
		if mx != "" {
			if g.maxIter, err = strconv.Atoi(mx); err != nil {
				return fmt.Errorf("-i %s: want max,min iterations", val)
			}
		}
		if mn != "" {
			if g.minIter, err = strconv.Atoi(mn); err != nil {
				return fmt.Errorf("-i %s: want max,min iterations", val)
			}
		}
		g.iterSet = true
	case 'I':
		lvl, width, ok := strings.Cut(val, ",")
		l, err := strconv.Atoi(lvl)
		if err != nil || (l != 95 && l != 99) {
			return fmt.Errorf("-I %s: confidence level must be 95 or 99", val)
		}
		c.ConfLevel = l
		if ok && width != "" {
			w, err := strconv.ParseFloat(width, 64)
			if err != nil || w <= 0 || w > 100 {
				return fmt.Errorf("-I %s: interval width must be a percentage in (0, 100]", val)
			}
			c.ConfWidth = w
		}
		g.confSet = true
	case 'j':
		c.Latency = true
	case 'l':
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("-l %s: want seconds (> 0) or a byte/transaction count (< 0)", val)
		}
		c.Length = v
	case 'n':
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 || n > MaxCPU+1 {
			return fmt.Errorf("-n %s: want a number of CPUs", val)
		}
		c.NumCPUs = n
	case 'N':
		c.NoControl = true
	case 'w':
		return parsePacing("-w", val, func(side int, s string) error {
			d, err := parseTimespec(s)
			if err != nil {
				return fmt.Errorf("-w %s: %w", val, err)
			}
			if side == 0 {
				c.LocalInterval = d
			} else {
				c.RemoteInterval = d
			}
			return nil
		})
	case 'W':
		return parseWidths("-W", val, &c.SendWidth, &c.RecvWidth)
	case 'p':
		p, lp, _ := strings.Cut(val, ",")
		if p != "" {
			if err := parsePort("-p", p, &c.ControlPort); err != nil {
				return err
			}
		}
		if lp != "" {
			return parsePort("-p", lp, &c.LocalControlPort)
		}
	case 'P':
		switch val {
		case "0":
			c.Banner = false
		case "1":
			c.Banner = true
		default:
			return fmt.Errorf("-P %s: want 0 or 1", val)
		}
	case 'r':
		// Confidence on the result only: vnet's confidence is on the
		// result alone anyway.
	case 's':
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 || n > 3600 {
			return fmt.Errorf("-s %s: want seconds to wait before the test", val)
		}
		c.Wait = time.Duration(n) * time.Second
	case 'S':
		c.KeepAlive = true
	case 't':
		t := strings.ToUpper(val)
		if t != OMNI && !contains(Tests, t) {
			return fmt.Errorf("-t %s: unknown test (have %s, %s)", val, strings.Join(Tests, ", "), OMNI)
		}
		c.TestName = t
	case 'T':
		return parseBind(val, &c.LocalBind, &c.RemoteBind)
	case 'v':
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return fmt.Errorf("-v %s: want a verbosity level (0, 1, 2)", val)
		}
		c.Verbosity = n
	case 'y':
		return parseIntPair("-y", val, &c.LocalPrio, &c.RemotePrio)
	case 'Y':
		return parseTOS(val, &c.LocalTOS, &c.RemoteTOS)
	case 'Z':
		c.Passphrase = val
	case 'J':
		c.JSON = true
	case 'Q':
		c.JSONStream = true
	case 'X':
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 || n > 64 {
			return fmt.Errorf("--instances %s: want 1..64", val)
		}
		c.Instances = n
	default:
		return notSupported(string(flag))
	}
	return nil
}

// finishConfidence applies -i and -I as netperf does: either asks for
// confidence (99% within 5% by default), and the iterations are 3 to 30.
func (c *Config) finishConfidence(g globalState) {
	if c.ConfLevel == 0 {
		c.ConfLevel = 99
	}
	if c.ConfWidth == 0 {
		c.ConfWidth = 5
	}
	c.MaxIter, c.MinIter = 10, 3
	if g.iterSet {
		c.MaxIter, c.MinIter = max(g.maxIter, 1), max(g.minIter, 1)
		if g.minIter == 0 {
			c.MinIter = 1
		}
	}
	c.MaxIter = max(c.MaxIter, c.MinIter)
	c.MaxIter, c.MinIter = min(max(c.MaxIter, 3), 30), min(max(c.MinIter, 3), 30)
}

// parseDemo reads -D time[,units]: interim results every |time| seconds
// (a negative time asks netperf to take the time more often, which vnet
// always does). The units are netperf's first guess of the rate, which it
// needs to decide when to look at the clock; vnet does not.
func (c *Config) parseDemo(val string) error {
	t, units, _ := strings.Cut(val, ",")
	if t == "" {
		t = "1"
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v == 0 || math.Abs(v) > 3600 || math.IsNaN(v) {
		return fmt.Errorf("-D %s: want an interval in seconds, 0 < |interval| <= 3600", val)
	}
	if units != "" {
		if _, err := ParseSize(units); err != nil {
			return fmt.Errorf("-D %s: units: %w", val, err)
		}
	}
	c.Interval = time.Duration(math.Abs(v) * float64(time.Second))
	return nil
}

// shape is a test as netperf's OMNI sees it.
type shape struct {
	udp, send, recv, rr, connect bool
	omni                         bool
}

func defaultShape(name string) (shape, error) {
	switch name {
	case TCPStream:
		return shape{send: true}, nil
	case TCPMaerts:
		return shape{recv: true}, nil
	case TCPRR:
		return shape{rr: true}, nil
	case TCPCRR:
		return shape{rr: true, connect: true}, nil
	case UDPStream:
		return shape{udp: true, send: true}, nil
	case UDPRR:
		return shape{udp: true, rr: true}, nil
	case OMNI:
		return shape{send: true, omni: true}, nil
	}
	return shape{}, fmt.Errorf("-t %s: unknown test", name)
}

// test is the engine's test for a shape.
func (s shape) test() (string, error) {
	switch {
	case s.rr && s.connect && s.udp:
		return "", fmt.Errorf("%w: a UDP connection test", ErrNotSupported)
	case s.rr && s.connect:
		return TCPCRR, nil
	case s.connect:
		return "", fmt.Errorf("%w: a connection test without data (TCP_CC)", ErrNotSupported)
	case s.rr && s.udp:
		return UDPRR, nil
	case s.rr:
		return TCPRR, nil
	case s.recv && s.udp:
		return UDPMaerts, nil
	case s.recv:
		return TCPMaerts, nil
	case s.udp:
		return UDPStream, nil
	}
	return TCPStream, nil
}

func (c *Config) testOption(g *globalState, s *shape, flag byte, val string) error {
	switch flag {
	case 'h':
		return errHelp
	case 'b':
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 || n > maxBurst {
			return fmt.Errorf("-b %s: want a number of requests (0..%d)", val, maxBurst)
		}
		c.FirstBurst = n
	case 'C':
		c.Cork = true
	case 'F':
		c.FastOpen = true
	case 'G':
		n, err := strconv.Atoi(val)
		if err != nil || n < minMSS || n > maxMSS {
			return fmt.Errorf("-G %s: want a TCP segment size (%d..%d bytes)", val, minMSS, maxMSS)
		}
		c.LocalMSS = n
	case 'q':
		n, err := strconv.ParseInt(val, 10, 32)
		if err != nil || n < 1 {
			return fmt.Errorf("-q %s: want a pacing rate in bytes per second (1..%d)", val, math.MaxInt32)
		}
		c.LocalPacingRate = int(n)
	case 'w':
		// netperf 2.7 takes a value here and does nothing with it.
	case 'W':
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 || n > maxWidth {
			return fmt.Errorf("-W %s: want a number of send buffers (1..%d)", val, maxWidth)
		}
		c.SendWidth = n
	case '4', '6':
		for i := range c.Targets {
			c.Targets[i].Family = string(flag)
		}
		g.family = string(flag)
	case 'c':
		s.connect = true
		if !s.omni {
			s.rr = true
		}
	case 'd':
		if !s.omni {
			return nil // netperf reads -d only for OMNI
		}
		return s.parseDirection(val)
	case 'D':
		c.LocalNoDelay, c.RemoteNoDelay = true, true
	case 'e':
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 || n > 3600 {
			return fmt.Errorf("-e %s: want the seconds a UDP_RR response may take", val)
		}
		c.UDPTimeout = n
	case 'H':
		host, fam, _ := strings.Cut(val, ",")
		if strings.Contains(host, "/") {
			return fmt.Errorf("%w: -H %s: a mask (random addresses)", ErrNotSupported, val)
		}
		f, err := parseFamily("-H", fam)
		if err != nil {
			return err
		}
		c.DataHost = host
		if f != "" {
			g.family = f
		}
	case 'L':
		host, fam, _ := strings.Cut(val, ",")
		if strings.Contains(host, "/") {
			return fmt.Errorf("%w: -L %s: a mask (random addresses)", ErrNotSupported, val)
		}
		if _, err := parseFamily("-L", fam); err != nil {
			return err
		}
		c.LocalDataHost = host
	case 'k', 'o', 'O':
		return c.parseOutput(flag, val)
	case 'K':
		l, r, ok := strings.Cut(val, ",")
		if !ok {
			r = l
		}
		for _, v := range []string{l, r} {
			if len(v) > 15 || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r > '~' }) {
				return fmt.Errorf("-K %s: not a congestion control's name", val)
			}
		}
		c.LocalCong, c.RemoteCong = l, r
	case 'm':
		if s.omni && !strings.HasPrefix(val, ",") {
			s.send = true
		}
		return parseExplicitPair("-m", val, &c.SendSize, &c.RemoteSendSize)
	case 'M':
		if s.omni && strings.Contains(val, ",") && !strings.HasSuffix(val, ",") {
			s.recv = true
		}
		return parseExplicitPair("-M", val, &c.RemoteRecvSize, &c.RecvSize)
	case 'n':
		// A connected UDP socket here: vnet netperf's always is.
	case 'N':
		c.RemoteConnected = true
	case 'P':
		l, r, ok := strings.Cut(val, ",")
		if !ok {
			r = l // one value is both ports, as netperf reads it
		}
		if l != "" {
			if err := parsePort("-P", l, &c.LocalDataPort); err != nil {
				return err
			}
		}
		if r != "" {
			return parsePort("-P", r, &c.RemoteDataPort)
		}
	case 'r':
		if s.omni {
			s.rr = true
		}
		return parsePair("-r", val, &c.ReqSize, &c.RespSize)
	case 's':
		return parsePair("-s", val, &c.LocalSndBuf, &c.LocalRcvBuf)
	case 'S':
		return parsePair("-S", val, &c.RemoteSndBuf, &c.RemoteRcvBuf)
	case 't':
		switch strings.ToLower(val) {
		case "stream", "sock_stream":
			s.udp = false
		case "dgram", "sock_dgram":
			s.udp = true
		default:
			return fmt.Errorf("-t %s: want stream or dgram", val)
		}
	case 'T':
		switch strings.ToLower(val) {
		case "tcp":
			s.udp = false
		case "udp":
			s.udp = true
		default:
			return fmt.Errorf("%w: -T %s (vnet netperf runs tcp and udp)", ErrNotSupported, val)
		}
	case 'u':
		c.UUID = val
	default:
		return notSupported(string(flag))
	}
	return nil
}

// parseDirection reads OMNI's -d: send, recv or both, as words joined
// by '|' or a number (0x2 send, 0x4 receive).
func (s *shape) parseDirection(val string) error {
	s.send, s.recv, s.rr = false, false, false
	var bits int64
	for _, w := range strings.Split(val, "|") {
		switch strings.ToLower(w) {
		case "xmit", "send", "stream", "transmit":
			bits |= 2
		case "recv", "receive", "maerts":
			bits |= 4
		case "rr":
			bits |= 6
		default:
			n, err := strconv.ParseInt(w, 0, 32)
			if err != nil || n&^6 != 0 {
				return fmt.Errorf("-d %s: want send, recv, rr or a number", val)
			}
			bits |= n
		}
	}
	switch bits {
	case 2:
		s.send = true
	case 4:
		s.recv = true
	case 6:
		s.rr = true
	default:
		return fmt.Errorf("-d %s: no direction", val)
	}
	return nil
}

// parseOutput reads -o, -O, -k and the selection after it: "?" for the
// list, "all", names separated by ',' (and ';' between lines of -O), or
// a file holding them.
func (c *Config) parseOutput(flag byte, val string) error {
	c.Output = map[byte]OutputMode{'o': OutputCSV, 'O': OutputHuman, 'k': OutputKeyVal}[flag]
	c.Selectors = nil
	switch {
	case val == "":
		return nil
	case val == "?":
		c.ListSelectors = true
		return nil
	case strings.EqualFold(val, "all"):
		c.Selectors = [][]string{allSelectors()}
		return nil
	case strings.ContainsAny(val, ",;") || selectorByName(val) != nil:
		return c.addSelectors(strings.Split(val, ";"))
	}
	b, err := os.ReadFile(val)
	if err != nil {
		return fmt.Errorf("-%c %s: neither output selectors nor a file of them: %w", flag, val, err)
	}
	if len(b) > 64<<10 {
		return fmt.Errorf("-%c %s: a selection file of %d bytes", flag, val, len(b))
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return c.addSelectors(lines)
}

// maxOutputBlocks is how many lines of output netperf prints (its blocks).
const maxOutputBlocks = 4

func (c *Config) addSelectors(blocks []string) error {
	for _, b := range blocks {
		if len(c.Selectors) == maxOutputBlocks {
			return fmt.Errorf("more than %d lines of output selectors", maxOutputBlocks)
		}
		var names []string
		for _, n := range strings.FieldsFunc(b, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			s := selectorByName(n)
			if s == nil {
				return fmt.Errorf("output selector %q: unknown (vnet netperf -- -o ? lists them)", n)
			}
			names = append(names, s.name)
		}
		if len(names) > 0 {
			c.Selectors = append(c.Selectors, names)
		}
	}
	return nil
}

// scan walks one part of the command line with netperf's option table.
// prefix names the part in errors ("-" for the test options, after
// "--"). Long options (vnet's own) are read in the global part.
func scan(args []string, opts map[byte]optKind, prefix string, fn func(flag byte, val string) error) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			return fmt.Errorf("unexpected argument %q", a)
		}
		if strings.HasPrefix(a, "--") && prefix == "" {
			name, val, hasVal := strings.Cut(a[2:], "=")
			flag, ok := map[string]byte{"json": 'J', "json-stream": 'Q', "instances": 'X', "help": 'h'}[name]
			if !ok {
				return fmt.Errorf("unknown option --%s", name)
			}
			if flag == 'X' && !hasVal {
				if i+1 >= len(args) {
					return fmt.Errorf("--instances needs a value")
				}
				i++
				val = args[i]
			}
			if flag != 'X' && hasVal {
				return fmt.Errorf("--%s takes no value", name)
			}
			if err := fn(flag, val); err != nil {
				return err
			}
			continue
		}
		flag, val := a[1], a[2:]
		kind, ok := opts[flag]
		if !ok {
			return fmt.Errorf("unknown %soption -%c", map[string]string{"": "", "-": "test "}[prefix], flag)
		}
		switch kind {
		case refused:
			return notSupported(prefix + string(flag))
		case noValue:
			if val != "" {
				return fmt.Errorf("-%c takes no value (in %q)", flag, a)
			}
		case optionalRate:
			if val != "" {
				return fmt.Errorf("-%c takes no value glued to it (in %q)", flag, a)
			}
			if i+1 < len(args) && args[i+1] != "" && args[i+1][0] >= '0' && args[i+1][0] <= '9' {
				i++
				val = args[i]
			}
		case optionalValue:
			if val == "" && i+1 < len(args) && args[i+1] != "" && args[i+1][0] != '-' {
				i++
				val = args[i]
			}
		case value:
			if val == "" {
				if i+1 >= len(args) {
					return fmt.Errorf("-%c needs a value", flag)
				}
				i++
				val = args[i]
			}
		}
		if err := fn(flag, val); err != nil {
			return err
		}
	}
	return nil
}

func parseFamily(flag, fam string) (string, error) {
	switch strings.ToLower(fam) {
	case "":
		return "", nil
	case "4", "inet", "af_inet":
		return "4", nil
	case "6", "inet6", "af_inet6":
		return "6", nil
	case "0", "unspec", "af_unspec":
		return "", nil
	}
	return "", fmt.Errorf("%s ...,%s: family must be 4, 6 or unspec", flag, fam)
}

// parseExplicitPair reads netperf's "first,second" where one value sets
// only the first.
func parseExplicitPair(flag, val string, a, b *int) error {
	first, second, _ := strings.Cut(val, ",")
	if first != "" {
		if err := parseSizeInto(flag, first, a); err != nil {
			return err
		}
	}
	if second != "" {
		return parseSizeInto(flag, second, b)
	}
	return nil
}

// eachOfPair calls set for each side of "a,b", "a" (both a), ",b" or
// "a,": the first side with dst 0, the second with 1.
func eachOfPair(val string, set func(side int, s string) error) error {
	first, second, pair := strings.Cut(val, ",")
	if !pair {
		second = first
	}
	for i, s := range []string{first, second} {
		if s == "" {
			continue
		}
		if err := set(i, s); err != nil {
			return err
		}
	}
	return nil
}

// parseIntPair reads "a,b", "a" (both), ",b" or "a," as plain integers.
func parseIntPair(flag, val string, a, b *int) error {
	dst := []*int{a, b}
	return eachOfPair(val, func(side int, s string) error {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%s %s: %q is not a number", flag, val, s)
		}
		*dst[side] = n
		return nil
	})
}

// parseBounded reads an alignment or offset pair, each 0..limit.
func parseBounded(flag, val string, limit int, a, b *int) error {
	x, y := *a, *b
	if err := parseIntPair(flag, val, &x, &y); err != nil {
		return err
	}
	if x < 0 || x > limit || y < 0 || y > limit {
		return fmt.Errorf("%s %s: want 0..%d", flag, val, limit)
	}
	*a, *b = x, y
	return nil
}

// parsePacing reads -w and -b's "local,remote": a lone value is this
// end's alone, as in netperf.
func parsePacing(flag, val string, set func(side int, s string) error) error {
	l, r, _ := strings.Cut(val, ",")
	if l == "" && r == "" {
		return fmt.Errorf("%s %q: want local[,remote]", flag, val)
	}
	for side, s := range []string{l, r} {
		if s != "" {
			if err := set(side, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseTimespec reads -w's times as netperf's convert_timespec does: a
// number with "u" is microseconds, with "s" (and no "m") seconds, and
// otherwise, "m" or nothing, milliseconds.
func parseTimespec(s string) (time.Duration, error) {
	digits := strings.TrimRight(s, "abcdefghijklmnopqrstuvwxyz")
	n, err := strconv.Atoi(digits)
	if err != nil || n <= 0 || n > 3600*1000*1000 {
		return 0, fmt.Errorf("%q is not a time (a number, with m, u or s)", s)
	}
	unit := time.Millisecond
	switch suffix := s[len(digits):]; {
	case strings.Contains(suffix, "m"):
	case strings.Contains(suffix, "u"):
		unit = time.Microsecond
	case strings.Contains(suffix, "s"):
		unit = time.Second
	case suffix != "":
		return 0, fmt.Errorf("%q: unknown unit %q (m, u or s)", s, suffix)
	}
	d := time.Duration(n) * unit
	if d > time.Hour {
		return 0, fmt.Errorf("%q is longer than an hour", s)
	}
	return d, nil
}

// maxWidth bounds -W: a ring is that many buffers of the message size.
const maxWidth = 4096

// parseWidths reads -W's "send,recv" (a lone value sets both).
func parseWidths(flag, val string, send, recv *int) error {
	s, r := *send, *recv
	if err := parseIntPair(flag, val, &s, &r); err != nil {
		return err
	}
	if s < 0 || s > maxWidth || r < 0 || r > maxWidth {
		return fmt.Errorf("%s %s: want 1..%d buffers", flag, val, maxWidth)
	}
	*send, *recv = s, r
	return nil
}

// parseTOS reads -Y local,remote: DSCP names (CS1, AF11, EF, ...), the
// old TOS names, or numbers (0x20, 32).
func parseTOS(val string, local, remote *int) error {
	dst := []*int{local, remote}
	return eachOfPair(val, func(side int, s string) error {
		v, ok := tosNames[strings.ToLower(s)]
		if !ok {
			n, err := strconv.ParseInt(s, 0, 32)
			if err != nil || n < 0 || n > 255 {
				return fmt.Errorf("-Y %s: %q is neither a DSCP name nor a TOS value 0..255", val, s)
			}
			v = int(n)
		}
		*dst[side] = v
		return nil
	})
}

// tosNames are the names -Y takes, with their TOS byte.
var tosNames = func() map[string]int {
	m := map[string]int{"ef": 0xb8, "lowdelay": 0x10, "throughput": 0x08, "reliability": 0x04}
	for class := 1; class <= 4; class++ {
		for drop := 1; drop <= 3; drop++ {
			m[fmt.Sprintf("af%d%d", class, drop)] = (class<<3 | drop<<1) << 2
		}
	}
	for n := 0; n <= 7; n++ {
		m[fmt.Sprintf("cs%d", n)] = n << 5
	}
	return m
}()

// Usage is the option summary.
const Usage = `usage: vnet netperf [global options] -- [test options]

netperf 2.7's options, with its meanings (docs/netperf.md has the table).

global options:
  -H host[,fam]     netserver to test against (repeat: concurrent tests); fam 4, 6 or unspec
  -p port[,lport]   netserver's control port (12865) and this end's
  -L host[,fam]     this end's control address
  -4 / -6           IPv4 / IPv6
  -t test           TCP_STREAM, TCP_MAERTS, UDP_STREAM, TCP_RR, TCP_CRR, UDP_RR, OMNI
  -l len            > 0: seconds; < 0: bytes (streams) or transactions (RR) (default 10)
  -c / -C           local / remote CPU utilization and service demand
  -n numcpu         this end's utilization over its first numcpu CPUs
  -D secs[,units]   interim results every |secs| seconds
  -P 0|1            hide / show the headings
  -v level          0: the result alone; 1: the table (default); 2: netperf's blocks under it
  -B brand          text at the end of each result line (with -P 0)
  -f k|m|g|K|M|G|x  units: 10^3/10^6/10^9 bit/s, 2^10/2^20/2^30 bytes/s, transactions/s
  -I lvl[,width]    repeat until the lvl% (95, 99) confidence interval is width% of the mean
  -i max,min        iterations for confidence (3 to 30)
  -r                confidence on the result only (always so)
  -j                latency statistics for RR tests
  -T lcpu,rcpu      run this end's / the netserver's data loop on one CPU
  -a / -A s,r       this end's / the netserver's buffer alignment
  -o / -O s,r       this end's / the netserver's buffer offset
  -F lfile[,rfile]  fill the send buffers from a file (the netserver's: netperf's netserver only)
  -s secs           wait between the setup and the data
  -S                SO_KEEPALIVE on the data connection
  -y l,r            SO_PRIORITY of the data sockets
  -Y l,r            IP TOS of the data sockets (0x20, 32, CS1, AF11, EF)
  -Z passphrase     send netserver a passphrase
  -N                no control connection: the data port already listens (test -P ,port)
  -w t[,rt] -b n[,rn]  pacing: n operations every t ms (u: µs, s: s), here and at the netserver
  -W s,r            the send and receive buffer rings' widths
  -d                debug lines on stderr (-d -d: and the data connection's TCP_INFO)
  -V                the netperf version this speaks
  --json            one JSON object with every parameter and result
  --json-stream     JSON lines: interim events as they happen, then the result
  --instances N     N concurrent tests per host, reported each and in aggregate

test options (after --):
  -m l[,r] / -M r[,l]  send / receive sizes, this end's and the netserver's
  -s s[,r] / -S s[,r]  this end's / the netserver's socket buffers
  -r req[,resp]        request and response sizes (RR)
  -P [lport],rport     data ports (one value: both)
  -H host[,fam]        the netserver's data address     -L host[,fam]  this end's
  -D                   TCP_NODELAY at both ends         -K loc[,rem]   congestion control
  -Y, -4, -6           as above, for the data connection
  -e secs              a UDP_RR response is lost after secs
  -N                   the netserver connects its UDP socket
  -b n                 first burst: n more requests outstanding (TCP_RR, UDP_RR)
  -C / -F              TCP_CORK here / TCP fast open          -W n  send ring width
  -o / -O / -k [sel]   CSV / columns / NAME=value output of the selected values; "?" lists them
  -d send|recv|rr, -T tcp|udp, -c   an OMNI test's direction, protocol, connection per transaction
  -u uuid              the test's UUID (the UUID selector)
sizes: K/M/G = 2^10/2^20/2^30, k/m/g = 10^3/10^6/10^9`
