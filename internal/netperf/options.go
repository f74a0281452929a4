package netperf

import (
	"fmt"
	"io"
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
	// OMNI is netperf's general test: -d says which way the data flows,
	// -T over which protocol, -c whether each transaction connects. It
	// runs as one of the tests above, or as UDPMaerts.
	OMNI = "OMNI"
	// UDPMaerts is OMNI's "-d recv -T udp": the netserver sends
	// datagrams. netperf has no classic test of that name; -t does not
	// take it.
	UDPMaerts = "UDP_MAERTS"
)

// isUDP reports whether a test moves datagrams.
func isUDP(test string) bool { return test == UDPStream || test == UDPRR || test == UDPMaerts }

// Tests lists the tests the engine runs.
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
	Test        string        `json:"test"`   // the test the engine runs (OMNI resolved)
	TestName    string        `json:"test_name"`
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
	Verbosity   int           `json:"verbosity"`          // -v
	Brand       string        `json:"brand,omitempty"`    // -B
	NumCPUs     int           `json:"num_cpus,omitempty"` // -n: the CPUs this end's utilization is a share of; 0: all
	Wait        time.Duration `json:"wait_ns,omitempty"`  // global -s: between setup and data
	KeepAlive   bool          `json:"keepalive"`          // global -S
	Passphrase  string        `json:"-"`                  // -Z
	FillFile    string        `json:"fill_file,omitempty"`
	RemoteFill  string        `json:"remote_fill_file,omitempty"`
	LocalPrio   int           `json:"local_socket_prio"` // -y: -1 leaves it
	RemotePrio  int           `json:"remote_socket_prio"`
	// Buffer alignment and offset (-a, -A, global -o, -O).
	LocalSendAlign   int `json:"local_send_align"`
	LocalRecvAlign   int `json:"local_recv_align"`
	RemoteSendAlign  int `json:"remote_send_align"`
	RemoteRecvAlign  int `json:"remote_recv_align"`
	LocalSendOffset  int `json:"local_send_offset"`
	LocalRecvOffset  int `json:"local_recv_offset"`
	RemoteSendOffset int `json:"remote_send_offset"`
	RemoteRecvOffset int `json:"remote_recv_offset"`

	// Test-specific options, after "--".
	SendSize       int `json:"send_size"`              // -m local
	RemoteSendSize int `json:"remote_send_size"`       // -m ,remote
	RecvSize       int `json:"recv_size"`              // -M ,local
	RemoteRecvSize int `json:"remote_recv_size"`       // -M remote
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
	UDPTimeout       int    `json:"udp_timeout_s,omitempty"`       // test -e: a UDP_RR response lost after this long
	RemoteConnected  bool   `json:"remote_connected"`              // test -N
	UUID             string `json:"uuid,omitempty"`                // test -u
	FirstBurst       int    `json:"first_burst,omitempty"`         // test -b: requests kept outstanding beyond the one awaited
	Cork             bool   `json:"local_cork,omitempty"`          // test -C: TCP_CORK on this end's data socket
	FastOpen         bool   `json:"fast_open,omitempty"`           // test -F: TCP fast open
	LocalMSS         int    `json:"local_mss_requested,omitempty"` // test -G: TCP_MAXSEG on this end's data socket
	LocalPacingRate  int    `json:"local_pacing_rate,omitempty"`   // test -q: SO_MAX_PACING_RATE, bytes/s

	// Global options of netperf's that change how the test runs.
	NoControl      bool          `json:"no_control,omitempty"`            // -N: no netserver; the data port already listens
	Debug          int           `json:"debug,omitempty"`                 // -d, once per -d
	LocalInterval  time.Duration `json:"local_interval_ns,omitempty"`     // -w: burst operations every interval
	LocalBurst     int           `json:"local_interval_burst,omitempty"`  // -b
	RemoteInterval time.Duration `json:"remote_interval_ns,omitempty"`    // -w ,r
	RemoteBurst    int           `json:"remote_interval_burst,omitempty"` // -b ,r
	SendWidth      int           `json:"send_width,omitempty"`            // -W: buffers in the send ring (0: netperf's default)
	RecvWidth      int           `json:"recv_width,omitempty"`
	// DumpTCPInfo prints the data connection's TCP_INFO to Diag at the
	// end, as netperf does with DUMP_TCP_INFO in its environment.
	DumpTCPInfo bool `json:"-"`
	// Diag is where -d's lines and TCP_INFO go (the command's stderr).
	Diag io.Writer `json:"-"`

	// Output (test -o, -O, -k): netperf's selectors, in blocks. Empty
	// Output is netperf's classic table.
	Output    OutputMode `json:"output,omitempty"`
	Selectors [][]string `json:"selectors,omitempty"`
	// ListSelectors: -o ? and its kin ask for the list of selectors.
	ListSelectors bool `json:"-"`
	// Version: -V.
	Version bool `json:"-"`
	// fill is -F's file's start, what the send buffers hold.
	fill []byte
}

// OutputMode is how the selectors are printed.
type OutputMode string

// The output modes.
const (
	OutputCSV    OutputMode = "csv"    // -o
	OutputHuman  OutputMode = "human"  // -O
	OutputKeyVal OutputMode = "keyval" // -k
)

// UnitLetter is -f's letter: k, m, g (bits), K, M, G (bytes) or x
// (transactions). JSON carries it as the letter, not as a number.
type UnitLetter byte

// MarshalText writes the letter.
func (u UnitLetter) MarshalText() ([]byte, error) { return []byte{byte(u)}, nil }

// UnmarshalText reads one of the letters.
func (u *UnitLetter) UnmarshalText(b []byte) error {
	if len(b) != 1 || !strings.Contains("kmgKMGx", string(b)) {
		return fmt.Errorf("units %q: want one of k m g K M G x", b)
	}
	*u = UnitLetter(b[0])
	return nil
}

// IsRR reports whether the test counts transactions.
func (c *Config) IsRR() bool { return c.Test == TCPRR || c.Test == TCPCRR || c.Test == UDPRR }

// maxBurst bounds -b: the send times of the requests outstanding are kept.
const maxBurst = 1 << 20

// The TCP segment sizes Linux takes in TCP_MAXSEG (TCP_MIN_MSS and
// MAX_TCP_WINDOW): outside them the setsockopt fails, which netperf
// ignores and vnet says at once.
const minMSS, maxMSS = 88, 32767

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

// Legacy reports whether the report is netperf's classic table: a
// classic test with no output selectors.
func (c *Config) Legacy() bool { return c.Output == "" && c.TestName != OMNI }

var errHelp = fmt.Errorf("help requested")

// IsHelp reports whether ParseArgs stopped for -h.
func IsHelp(err error) bool { return err == errHelp }

// ErrNotSupported is wrapped by the error for an option netperf has and
// vnet netperf does not.
var ErrNotSupported = fmt.Errorf("not supported")

func notSupported(flag string) error { return fmt.Errorf("%w: -%s", ErrNotSupported, flag) }

// MaxMessage bounds message and request sizes: one buffer per connection.
const MaxMessage = 16 << 20

func (c *Config) check() error {
	for _, v := range []struct {
		name string
		n    int
	}{{"-m", c.SendSize}, {"-m remote", c.RemoteSendSize}, {"-M", c.RemoteRecvSize}, {"-M local", c.RecvSize},
		{"-r request", c.ReqSize}, {"-r response", c.RespSize}} {
		if v.n > MaxMessage {
			return fmt.Errorf("%s %d: larger than %d bytes", v.name, v.n, MaxMessage)
		}
	}
	if c.IsRR() && (c.ReqSize < 1 || c.RespSize < 1) {
		return fmt.Errorf("-r %d,%d: request and response must be at least 1 byte", c.ReqSize, c.RespSize)
	}
	if isUDP(c.Test) && (c.SendSize > maxUDP || c.RemoteSendSize > maxUDP || c.ReqSize > maxUDP || c.RespSize > maxUDP) {
		return fmt.Errorf("UDP messages carry at most %d bytes", maxUDP)
	}
	if isUDP(c.Test) && c.Length < 0 {
		return fmt.Errorf("-l %g: a UDP test is bounded by time (datagrams may be lost), not by a count", c.Length)
	}
	if c.Duration() > 24*time.Hour {
		return fmt.Errorf("-l %g: longer than a day", c.Length)
	}
	if c.Length < 0 && -c.Length > math.MaxInt32 {
		return fmt.Errorf("-l %g: netperf's protocol counts to %d", c.Length, math.MaxInt32)
	}
	return c.checkOptions()
}

// checkOptions refuses the test options that have no meaning for the test:
// what netperf would fail on in the middle of the test, or do nothing with.
func (c *Config) checkOptions() error {
	switch {
	case c.Cork && isUDP(c.Test):
		return fmt.Errorf("-C: TCP_CORK on a UDP test (netperf fails setting it)")
	case c.FastOpen && isUDP(c.Test):
		return fmt.Errorf("-F: TCP fast open on a UDP test")
	case c.FastOpen && c.Test == TCPMaerts:
		return fmt.Errorf("-F: TCP fast open carries this end's first data in the SYN, and in TCP_MAERTS this end sends none")
	case c.NoControl && c.Test == UDPMaerts:
		return fmt.Errorf("-N: a UDP test where the other end sends needs the netserver to start sending")
	case c.NoControl && c.IsRR() && c.RemoteDataPort == 0 && c.ReqSize != c.RespSize:
		return fmt.Errorf("-N -r %d,%d: the echo service answers with the request's size (name another port with -P)", c.ReqSize, c.RespSize)
	case c.NoControl && c.Length < 0 && c.Test == TCPMaerts:
		return fmt.Errorf("-N -l %g: chargen sends until the connection closes; bound the test by time", c.Length)
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
