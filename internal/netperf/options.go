package netperf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Test names, as netperf spells them.
const (
	TCPStream = "TCP_STREAM"
	TCPMaerts = "TCP_MAERTS"
	UDPStream = "UDP_STREAM"
	TCPRR     = "TCP_RR"
	TCPCRR    = "TCP_CRR"
	UDPRR     = "UDP_RR"
)

// Tests lists the supported tests.
var Tests = []string{TCPStream, TCPMaerts, UDPStream, TCPRR, TCPCRR, UDPRR}

// DefaultPort is netserver's control port, as netperf's.
const DefaultPort = 12865

// Target is one -H host[,family].
type Target struct {
	Host   string `json:"host"`
	Family string `json:"family"` // "", "4" or "6" (netperf also takes inet/inet6)
}

// Config is a parsed netperf command line. Its JSON names follow the rest
// of the report's (snake_case, units in the name).
type Config struct {
	Targets     []Target      `json:"targets"`
	ControlPort int           `json:"control_port"`
	Length      float64       `json:"length"` // -l: > 0 seconds; < 0 bytes (streams) or transactions (RR)
	Test        string        `json:"test"`
	LocalCPU    bool          `json:"local_cpu"`  // -c
	RemoteCPU   bool          `json:"remote_cpu"` // -C
	ConfLevel   int           `json:"conf_level"` // -I level (95 or 99); 0 when no confidence target is set
	ConfWidth   float64       `json:"conf_width_percent"`
	MaxIter     int           `json:"max_iterations"` // -i
	MinIter     int           `json:"min_iterations"`
	Interval    time.Duration `json:"interval_ns"` // -D: interim results
	Banner      bool          `json:"banner"`      // -P 1 (the default)
	Latency     bool          `json:"latency"`     // -j: latency percentiles for RR
	JSON        bool          `json:"json"`
	JSONStream  bool          `json:"json_stream"`
	Instances   int           `json:"instances"`
	Units       UnitLetter    `json:"units"`          // -f
	LocalBind   *int          `json:"local_cpu_bind"` // -T lcpu,rcpu: the CPU of this end's data loop, nil = unbound
	RemoteBind  *int          `json:"remote_cpu_bind"`

	// Test-specific options, after "--".
	SendSize       int `json:"send_size"`              // -m
	RecvSize       int `json:"recv_size"`              // -M
	LocalSndBuf    int `json:"local_sndbuf_requested"` // -s; 0: the system's
	LocalRcvBuf    int `json:"local_rcvbuf_requested"`
	RemoteSndBuf   int `json:"remote_sndbuf_requested"` // -S
	RemoteRcvBuf   int `json:"remote_rcvbuf_requested"`
	ReqSize        int `json:"req_size"` // -r
	RespSize       int `json:"resp_size"`
	LocalDataPort  int `json:"local_data_port"` // -P lport,rport
	RemoteDataPort int `json:"remote_data_port"`

	DataHost         string `json:"data_host,omitempty"`       // test -H: the netserver's data address
	LocalDataHost    string `json:"local_data_host,omitempty"` // test -L: this end's data address
	LocalHost        string `json:"local_host,omitempty"`      // global -L: this end's control address
	LocalControlPort int    `json:"local_control_port,omitempty"`
	LocalTOS         int    `json:"local_tos"` // -Y: -1 leaves it
	RemoteTOS        int    `json:"remote_tos"`
	LocalCong        string `json:"local_cong_control,omitempty"` // test -K
	RemoteCong       string `json:"remote_cong_control,omitempty"`
	LocalNoDelay     bool   `json:"local_nodelay"` // test -D
	RemoteNoDelay    bool   `json:"remote_nodelay"`
}

// UnitLetter is -f's letter: k, m, g (bits) or K, M, G (bytes). JSON
// carries it as the letter, not as a number.
type UnitLetter byte

// MarshalText writes the letter.
func (u UnitLetter) MarshalText() ([]byte, error) { return []byte{byte(u)}, nil }

// UnmarshalText reads one of the six letters.
func (u *UnitLetter) UnmarshalText(b []byte) error {
	if len(b) != 1 || !strings.Contains("kmgKMG", string(b)) {
		return fmt.Errorf("units %q: want one of k m g K M G", b)
	}
	*u = UnitLetter(b[0])
	return nil
}

// IsRR reports whether the test counts transactions.
func (c *Config) IsRR() bool { return c.Test == TCPRR || c.Test == TCPCRR || c.Test == UDPRR }

// Duration is the test length in time, or 0 when it is a byte or transaction count.
func (c *Config) Duration() time.Duration {
	if c.Length > 0 {
		return time.Duration(c.Length * float64(time.Second))
	}
	return 0
}

// Count is the byte or transaction count of a negative -l, or 0.
func (c *Config) Count() int64 {
	if c.Length < 0 {
		return int64(-c.Length)
	}
	return 0
}

// Usage is the option summary.
const Usage = `usage: vnet netperf [global options] -- [test options]

global options:
  -H host[,family]   netserver to test against (repeat for concurrent tests); family 4 or 6
  -p port            netserver control port (default 12865)
  -l len             > 0: seconds; < 0: bytes (streams) or transactions (RR) (default 10)
  -t test            TCP_STREAM, TCP_MAERTS, UDP_STREAM, TCP_RR, TCP_CRR, UDP_RR
  -c / -C            report local / remote CPU utilization and service demand
  -I lvl,width       confidence: level 95 or 99, interval width in % of the mean (default 99,5)
  -i max,min         iterations for -I (default 10,3)
  -D interval        report interim results every interval seconds
  -P 0|1             suppress or show the banner and headers
  -j                 latency percentiles for RR tests
  -f k|m|g|K|M|G     throughput units: 10^3/10^6/10^9 bits or 2^10/2^20/2^30 bytes per second
  -T lcpu,rcpu       run this end's / the netserver's data loop on one CPU
                     (-T 1: both on CPU 1; -T 1,: only here; -T ,1: only there)
  --json             one JSON object with every parameter and result
  --json-stream      JSON lines: interval events as they happen, then the result
  --instances N      N concurrent tests per host, reported each and in aggregate

test options (after --):
  -m size   send message size        -M size   receive size
  -s size[,size]  local send,receive socket buffer    -S size[,size]  remote
  -r req[,resp]   request and response sizes (RR)      -P [lport],rport  data ports
sizes: K/M/G = 2^10/2^20/2^30, k/m/g = 10^3/10^6/10^9`

// ParseArgs reads netperf's command line: global options, then "--", then
// test-specific ones. Values may be glued to their flag (-l10) or follow it.
func ParseArgs(args []string) (*Config, error) {
	c := &Config{LocalTOS: -1, RemoteTOS: -1, ControlPort: DefaultPort, Length: 10, Test: TCPStream, Banner: true, Instances: 1, Units: 'm', ReqSize: 1, RespSize: 1}
	global, testArgs := args, []string(nil)
	for i, a := range args {
		if a == "--" {
			global, testArgs = args[:i], args[i+1:]
			break
		}
	}
	confSet, iterSet := false, false
	err := scan(global, "cCjh", func(flag, val string) error {
		switch flag {
		case "H":
			host, fam, _ := strings.Cut(val, ",")
			switch fam {
			case "", "4", "6":
			case "inet":
				fam = "4"
			case "inet6":
				fam = "6"
			default:
				return fmt.Errorf("-H %s: family must be 4 or 6", val)
			}
			if host == "" {
				return fmt.Errorf("-H needs a host")
			}
			c.Targets = append(c.Targets, Target{Host: host, Family: fam})
		case "p":
			p, _, _ := strings.Cut(val, ",")
			return parsePort("-p", p, &c.ControlPort)
		case "l":
			v, err := strconv.ParseFloat(val, 64)
			if err != nil || v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("-l %s: want seconds (> 0) or a byte/transaction count (< 0)", val)
			}
			c.Length = v
		case "t":
			t := strings.ToUpper(val)
			if !contains(Tests, t) {
				return fmt.Errorf("-t %s: unknown test (have %s)", val, strings.Join(Tests, ", "))
			}
			c.Test = t
		case "c":
			c.LocalCPU = true
		case "C":
			c.RemoteCPU = true
		case "j":
			c.Latency = true
		case "h":
			return errHelp
		case "I":
			lvl, width, ok := strings.Cut(val, ",")
			l, err := strconv.Atoi(lvl)
			if err != nil || (l != 95 && l != 99) {
				return fmt.Errorf("-I %s: confidence level must be 95 or 99", val)
			}
			c.ConfLevel, c.ConfWidth = l, 5
			if ok {
				w, err := strconv.ParseFloat(width, 64)
				if err != nil || w <= 0 || w > 100 {
					return fmt.Errorf("-I %s: interval width must be a percentage in (0, 100]", val)
				}
				c.ConfWidth = w
			}
			confSet = true
		case "i":
			mx, mn, _ := strings.Cut(val, ",")
			var err error
			if c.MaxIter, err = strconv.Atoi(mx); err != nil || c.MaxIter < 1 || c.MaxIter > 30 {
				return fmt.Errorf("-i %s: max iterations must be 1..30", val)
			}
			c.MinIter = min(3, c.MaxIter)
			if mn != "" {
				if c.MinIter, err = strconv.Atoi(mn); err != nil || c.MinIter < 1 || c.MinIter > c.MaxIter {
					return fmt.Errorf("-i %s: min iterations must be 1..max", val)
				}
			}
			iterSet = true
		case "D":
			v, err := strconv.ParseFloat(val, 64)
			if err != nil || v <= 0 || v > 3600 {
				return fmt.Errorf("-D %s: interval must be seconds in (0, 3600]", val)
			}
			c.Interval = time.Duration(v * float64(time.Second))
		case "P":
			switch val {
			case "0":
				c.Banner = false
			case "1":
				c.Banner = true
			default:
				return fmt.Errorf("-P %s: want 0 or 1", val)
			}
		case "f":
			if err := c.Units.UnmarshalText([]byte(val)); err != nil {
				return fmt.Errorf("-f %s: want one of k m g K M G", val)
			}
		case "T":
			return parseBind(val, &c.LocalBind, &c.RemoteBind)
		case "-json":
			c.JSON = true
		case "-json-stream":
			c.JSONStream = true
		case "-instances":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > 256 {
				return fmt.Errorf("--instances %s: want 1..256", val)
			}
			c.Instances = n
		case "-help":
			return errHelp
		default:
			return fmt.Errorf("unknown option -%s", flag)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if confSet && !iterSet {
		c.MaxIter, c.MinIter = 10, 3
	}
	if iterSet && !confSet {
		c.ConfLevel, c.ConfWidth = 99, 5
	}
	if len(c.Targets) == 0 {
		c.Targets = []Target{{Host: "localhost"}}
	}
	if err := c.parseTestArgs(testArgs); err != nil {
		return nil, err
	}
	return c, c.check()
}

var errHelp = fmt.Errorf("help requested")

// IsHelp reports whether ParseArgs stopped for -h.
func IsHelp(err error) bool { return err == errHelp }

func (c *Config) parseTestArgs(args []string) error {
	return scan(args, "", func(flag, val string) error {
		switch flag {
		case "m":
			return parseSizeInto("-m", val, &c.SendSize)
		case "M":
			return parseSizeInto("-M", val, &c.RecvSize)
		case "s":
			return parsePair("-s", val, &c.LocalSndBuf, &c.LocalRcvBuf)
		case "S":
			return parsePair("-S", val, &c.RemoteSndBuf, &c.RemoteRcvBuf)
		case "r":
			return parsePair("-r", val, &c.ReqSize, &c.RespSize)
		case "P":
			l, r, ok := strings.Cut(val, ",")
			if !ok {
				r, l = l, "" // a lone port is the remote one, where the netserver listens
			}
			if l != "" {
				if err := parsePort("-P", l, &c.LocalDataPort); err != nil {
					return err
				}
			}
			if r != "" {
				return parsePort("-P", r, &c.RemoteDataPort)
			}
			return nil
		}
		return fmt.Errorf("unknown test option -%s", flag)
	})
}

// MaxMessage bounds message and request sizes: one buffer per connection.
const MaxMessage = 16 << 20

func (c *Config) check() error {
	for _, v := range []struct {
		name string
		n    int
	}{{"-m", c.SendSize}, {"-M", c.RecvSize}, {"-r request", c.ReqSize}, {"-r response", c.RespSize}} {
		if v.n > MaxMessage {
			return fmt.Errorf("%s %d: larger than %d bytes", v.name, v.n, MaxMessage)
		}
	}
	if c.IsRR() && (c.ReqSize < 1 || c.RespSize < 1) {
		return fmt.Errorf("-r %d,%d: request and response must be at least 1 byte", c.ReqSize, c.RespSize)
	}
	if (c.Test == UDPStream || c.Test == UDPRR) && (c.SendSize > 65507 || c.ReqSize > 65507 || c.RespSize > 65507) {
		return fmt.Errorf("UDP messages carry at most 65507 bytes")
	}
	if c.Duration() > 24*time.Hour {
		return fmt.Errorf("-l %g: longer than a day", c.Length)
	}
	return nil
}

// scan walks short options ("-l 10", "-l10") and long ones ("--json",
// "--instances 4", "--instances=4"). noValue lists the flags without value.
func scan(args []string, noValue string, fn func(flag, val string) error) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			return fmt.Errorf("unexpected argument %q", a)
		}
		if strings.HasPrefix(a, "--") {
			name, val, hasVal := strings.Cut(a[2:], "=")
			if name == "instances" && !hasVal {
				if i+1 >= len(args) {
					return fmt.Errorf("--instances needs a value")
				}
				i++
				val = args[i]
			}
			if err := fn("-"+name, val); err != nil {
				return err
			}
			continue
		}
		flag, val := a[1:2], a[2:]
		if strings.Contains(noValue, flag) {
			if val != "" {
				return fmt.Errorf("-%s takes no value", flag)
			}
		} else if val == "" {
			if i+1 >= len(args) {
				return fmt.Errorf("-%s needs a value", flag)
			}
			i++
			val = args[i]
		}
		if err := fn(flag, val); err != nil {
			return err
		}
	}
	return nil
}

// ParseSize reads netperf's sizes: K/M/G are 2^10/2^20/2^30, k/m/g 10^3/10^6/10^9.
func ParseSize(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("empty size")
	}
	mult := 1
	switch s[len(s)-1] {
	case 'K':
		mult = 1 << 10
	case 'M':
		mult = 1 << 20
	case 'G':
		mult = 1 << 30
	case 'k':
		mult = 1e3
	case 'm':
		mult = 1e6
	case 'g':
		mult = 1e9
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size (a number with K/M/G or k/m/g)", s)
	}
	if n > math.MaxInt32/mult {
		return 0, fmt.Errorf("%s is too large", s)
	}
	return n * mult, nil
}

func parseSizeInto(flag, val string, dst *int) error {
	n, err := ParseSize(val)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	*dst = n
	return nil
}

// parsePair reads "a,b", "a" (both a) or ",b" (only b).
func parsePair(flag, val string, a, b *int) error {
	first, second, hasSecond := strings.Cut(val, ",")
	if first != "" {
		if err := parseSizeInto(flag, first, a); err != nil {
			return err
		}
		if !hasSecond {
			*b = *a
		}
	}
	if hasSecond && second != "" {
		return parseSizeInto(flag, second, b)
	}
	return nil
}

// parseBind reads -T as netperf does: "l,r", "n" for both ends, "l," or ",r" for one.
func parseBind(val string, local, remote **int) error {
	l, r, pair := strings.Cut(val, ",")
	if !pair {
		r = l
	}
	if l == "" && r == "" {
		return fmt.Errorf("-T %q: want lcpu,rcpu", val)
	}
	for _, side := range []struct {
		s   string
		dst **int
	}{{l, local}, {r, remote}} {
		if side.s == "" {
			continue
		}
		n, err := strconv.Atoi(side.s)
		if err != nil || n < 0 || n > MaxCPU {
			return fmt.Errorf("-T %s: %q is not a CPU number (0..%d)", val, side.s, MaxCPU)
		}
		*side.dst = &n
	}
	return nil
}

func parsePort(flag, val string, dst *int) error {
	p, err := strconv.Atoi(val)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%s %s: not a port", flag, val)
	}
	*dst = p
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
