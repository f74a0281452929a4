package netperf

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every option netperf 2.7 takes is read with its meaning or refused as
// not supported; none is misread.
func TestNetperfOptions(t *testing.T) {
	dir := t.TempDir()
	fill := filepath.Join(dir, "fill")
	os.WriteFile(fill, []byte("abc"), 0o644)
	sel := filepath.Join(dir, "sel")
	os.WriteFile(sel, []byte("THROUGHPUT,ELAPSED_TIME\n# a comment\nP50_LATENCY\n"), 0o644)
	tests := []struct {
		args  string
		check func(*Config) bool
	}{
		{"-4 -H h", func(c *Config) bool { return c.Targets[0] == Target{"h", "4"} }},
		{"-6", func(c *Config) bool { return c.Targets[0].Family == "6" }},
		{"-H h,inet6", func(c *Config) bool { return c.Targets[0].Family == "6" }},
		{"-L 10.0.0.1,4", func(c *Config) bool { return c.LocalHost == "10.0.0.1" && c.Targets[0].Family == "4" }},
		{"-p 12866,5000", func(c *Config) bool { return c.ControlPort == 12866 && c.LocalControlPort == 5000 }},
		{"-v 0", func(c *Config) bool { return c.Verbosity == 0 }},
		{"-B tag -P 0", func(c *Config) bool { return c.Brand == "tag" && !c.Banner }},
		{"-c 1000 -C", func(c *Config) bool { return c.LocalCPU && c.RemoteCPU }},
		{"-n 1", func(c *Config) bool { return c.NumCPUs == 1 }},
		{"-D -0.2", func(c *Config) bool { return c.Interval == 200*time.Millisecond }},
		{"-D 1,10M", func(c *Config) bool { return c.Interval == time.Second }},
		{"-F " + fill, func(c *Config) bool { return c.FillFile == fill && string(c.fill) == "abc" }},
		{"-F ," + "/dev/urandom", func(c *Config) bool { return c.RemoteFill == "/dev/urandom" && c.FillFile == "" }},
		{"-a 16,32 -A 64 -o 4,8 -O ,2", func(c *Config) bool {
			return c.LocalSendAlign == 16 && c.LocalRecvAlign == 32 && c.RemoteSendAlign == 64 && c.RemoteRecvAlign == 64 &&
				c.LocalSendOffset == 4 && c.LocalRecvOffset == 8 && c.RemoteSendOffset == 0 && c.RemoteRecvOffset == 2
		}},
		{"-s 2 -S", func(c *Config) bool { return c.Wait == 2*time.Second && c.KeepAlive }},
		{"-y 1,2 -Y CS1,0x28", func(c *Config) bool {
			return c.LocalPrio == 1 && c.RemotePrio == 2 && c.LocalTOS == 0x20 && c.RemoteTOS == 0x28
		}},
		{"-Y EF", func(c *Config) bool { return c.LocalTOS == 0xb8 && c.RemoteTOS == 0xb8 }},
		{"-Z secret -r", func(c *Config) bool { return c.Passphrase == "secret" }},
		{"-V", func(c *Config) bool { return c.Version }},
		{"-t omni", func(c *Config) bool {
			return c.Test == TCPStream && c.TestName == OMNI && c.Output == OutputHuman && len(c.Selectors) == 1
		}},
		{"-t OMNI -- -d rr", func(c *Config) bool { return c.Test == TCPRR && c.ReqSize == 1 && c.RespSize == 1 && c.Units == 'x' }},
		{"-t OMNI -- -d recv", func(c *Config) bool { return c.Test == TCPMaerts }},
		{"-t OMNI -- -d 6 -c", func(c *Config) bool { return c.Test == TCPCRR }},
		{"-t OMNI -- -T udp", func(c *Config) bool { return c.Test == UDPStream }},
		{"-t OMNI -- -T UDP -r 64", func(c *Config) bool { return c.Test == UDPRR && c.ReqSize == 64 }},
		{"-t TCP_RR -- -c", func(c *Config) bool { return c.Test == TCPCRR }},
		{"-t TCP_STREAM -- -d rr", func(c *Config) bool { return c.Test == TCPStream }}, // -d is OMNI's alone
		{"-t TCP_MAERTS -- -m ,8K -M ,4K", func(c *Config) bool { return c.RemoteSendSize == 8192 && c.RecvSize == 4096 && c.SendSize == 0 }},
		{"-- -D -K cubic,reno -e 1 -N -n -u u-1", func(c *Config) bool {
			return c.LocalNoDelay && c.RemoteNoDelay && c.LocalCong == "cubic" && c.RemoteCong == "reno" && c.UDPTimeout == 1 && c.RemoteConnected && c.UUID == "u-1"
		}},
		{"-- -H 10.0.0.2,4 -L 10.0.0.1", func(c *Config) bool { return c.DataHost == "10.0.0.2" && c.LocalDataHost == "10.0.0.1" }},
		{"-- -K bbr", func(c *Config) bool { return c.LocalCong == "bbr" && c.RemoteCong == "bbr" }},
		{"-- -o", func(c *Config) bool { return c.Output == OutputCSV && len(c.Selectors[0]) == 6 }},
		{"-c -- -k", func(c *Config) bool { return c.Output == OutputKeyVal && len(c.Selectors[0]) == 23 }},
		{"-- -O p50_latency,THROUGHPUT;ELAPSED_TIME", func(c *Config) bool {
			return reflect.DeepEqual(c.Selectors, [][]string{{"P50_LATENCY", "THROUGHPUT"}, {"ELAPSED_TIME"}})
		}},
		{"-- -k " + sel, func(c *Config) bool {
			return reflect.DeepEqual(c.Selectors, [][]string{{"THROUGHPUT", "ELAPSED_TIME"}, {"P50_LATENCY"}})
		}},
		{"-- -o all", func(c *Config) bool { return len(c.Selectors[0]) == len(selectors)-2 }},
		{"-- -o ?", func(c *Config) bool { return c.ListSelectors }},
		{"-t TCP_RR -f m", func(c *Config) bool { return c.Units == 'm' }},
		{"-d -d -N", func(c *Config) bool { return c.Debug == 2 && c.NoControl }},
		{"-w 10 -b 4", func(c *Config) bool {
			return c.LocalInterval == 10*time.Millisecond && c.LocalBurst == 4 && c.RemoteBurst == 0 && c.RemoteInterval == 0
		}},
		{"-w 500u,2s -b ,3", func(c *Config) bool {
			return c.LocalInterval == 500*time.Microsecond && c.RemoteInterval == 2*time.Second && c.LocalBurst == 0 && c.RemoteBurst == 3
		}},
		{"-b 2,5", func(c *Config) bool { // a burst without an interval: every millisecond
			return c.LocalBurst == 2 && c.RemoteBurst == 5 && c.LocalInterval == time.Millisecond && c.RemoteInterval == time.Millisecond
		}},
		{"-w 20m", func(c *Config) bool { return c.LocalInterval == 20*time.Millisecond && c.LocalBurst == 0 }},
		{"-W 4", func(c *Config) bool { return c.SendWidth == 4 && c.RecvWidth == 4 }},
		{"-W ,3 -- -W 5", func(c *Config) bool { return c.SendWidth == 5 && c.RecvWidth == 3 }},
		{"-t TCP_RR -- -b 4 -C -F -w 7", func(c *Config) bool { return c.FirstBurst == 4 && c.Cork && c.FastOpen }},
		{"-t OMNI -- -d recv -T udp", func(c *Config) bool { return c.Test == UDPMaerts && c.Output == OutputHuman }},
		{"-N -t TCP_RR -- -r 64", func(c *Config) bool { return c.ReqSize == 64 && c.RespSize == 64 }},
		{"-N -t TCP_RR -- -r 1,64 -P ,7000", func(c *Config) bool { return c.RemoteDataPort == 7000 }},
		{"-f x", func(c *Config) bool { return c.Units == 'm' }}, // transactions mean nothing to a stream
		{"-- -G 1000 -q 125000", func(c *Config) bool { return c.LocalMSS == 1000 && c.LocalPacingRate == 125000 }},
	}
	for _, tt := range tests {
		c, err := ParseArgs(strings.Fields(tt.args))
		if err != nil {
			t.Errorf("%s: %v", tt.args, err)
			continue
		}
		if !tt.check(c) {
			t.Errorf("%s: %+v", tt.args, c)
		}
	}
}

func TestNetperfOptionsRefused(t *testing.T) {
	for _, args := range []string{"-k 1", "-K 1", "-- -a", "-- -B", "-- -f", "-- -g", "-- -i 1", "-- -I", "-- -j 2", "-- -l 1",
		"-- -p 5000,5010", "-- -R 1", "-- -U", "-- -V", "-- -T sctp", "-- -H 10.0.0.1/24", "-t OMNI -- -d rr -c -T udp"} {
		_, err := ParseArgs(strings.Fields(args))
		if !errors.Is(err, ErrNotSupported) {
			t.Errorf("%s: %v, want not supported", args, err)
		}
	}
	for _, args := range []string{"-- -o NOPE", "-- -Z", "-Y 256", "-Y bogus", "-a 99999", "-l -5 -t UDP_RR", "-D 0", "-t TCP_RR -- -O THROUGHPUT;A;B;C;D",
		"-t UDP_STREAM -- -C", "-t UDP_RR -- -F", "-t TCP_MAERTS -- -F", "-N -t OMNI -- -d recv -T udp", "-N -t TCP_RR -- -r 1,64",
		"-N -t TCP_MAERTS -l -1000", "-w 10x", "-w 0", "-w ,", "-b -1", "-W 99999", "-- -W 0", "-- -b x", "-t TCP_RR -- -b -1",
		"-- -G 87", "-- -G 40000", "-- -G x", "-- -q 0", "-- -q 1G", "-- -q 4294967296"} {
		if _, err := ParseArgs(strings.Fields(args)); err == nil || errors.Is(err, ErrNotSupported) {
			t.Errorf("%s: %v, want a usage error", args, err)
		}
	}
}
