package netperf

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int
		bad  bool
	}{
		{"8192", 8192, false}, {"8K", 8192, false}, {"64K", 65536, false}, {"1M", 1 << 20, false},
		{"1G", 1 << 30, false}, {"8k", 8000, false}, {"1m", 1e6, false}, {"1g", 1e9, false},
		{"", 0, true}, {"x", 0, true}, {"-1", 0, true}, {"3G", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v", tt.in, got, err)
		}
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(*Config) bool
	}{
		{"defaults", nil, func(c *Config) bool {
			return c.Test == TCPStream && c.Length == 10 && c.ControlPort == 12865 && c.Targets[0].Host == "localhost" && c.Banner && c.ReqSize == 0 && c.Units == 'm' && c.Verbosity == 1
		}},
		{"glued and separate", []string{"-H10.0.0.1", "-l", "30", "-tTCP_RR", "-c", "-C"}, func(c *Config) bool {
			return c.Targets[0].Host == "10.0.0.1" && c.Length == 30 && c.Test == TCPRR && c.LocalCPU && c.RemoteCPU
		}},
		{"family", []string{"-H", "::1,6"}, func(c *Config) bool { return c.Targets[0] == Target{"::1", "6"} }},
		{"two hosts", []string{"-H", "a", "-H", "b"}, func(c *Config) bool { return len(c.Targets) == 2 }},
		{"negative length", []string{"-l", "-1000000"}, func(c *Config) bool { return c.Count() == 1e6 && c.Duration() == 0 }},
		{"test options", []string{"--", "-m", "8K", "-M", "4k", "-s", "64K", "-S", "8192,16K"}, func(c *Config) bool {
			return c.SendSize == 8192 && c.RemoteRecvSize == 4000 && c.RecvSize == 0 && c.LocalSndBuf == 65536 && c.LocalRcvBuf == 65536 && c.RemoteSndBuf == 8192 && c.RemoteRcvBuf == 16384
		}},
		{"rr sizes", []string{"-t", "tcp_rr", "--", "-r", "64,1K"}, func(c *Config) bool { return c.ReqSize == 64 && c.RespSize == 1024 }},
		{"rr one size", []string{"-t", "UDP_RR", "--", "-r", "32"}, func(c *Config) bool { return c.ReqSize == 32 && c.RespSize == 32 }},
		{"data ports", []string{"--", "-P", ",5001"}, func(c *Config) bool { return c.RemoteDataPort == 5001 && c.LocalDataPort == 0 }},
		{"lone data port is both", []string{"--", "-P", "5001"}, func(c *Config) bool { return c.RemoteDataPort == 5001 && c.LocalDataPort == 5001 }},
		{"confidence", []string{"-I", "95,2"}, func(c *Config) bool {
			return c.ConfLevel == 95 && c.ConfWidth == 2 && c.MaxIter == 10 && c.MinIter == 3
		}},
		{"iterations alone", []string{"-i", "5,2"}, func(c *Config) bool { return c.ConfLevel == 99 && c.MaxIter == 5 && c.MinIter == 3 }},
		{"iterations clamped as netperf does", []string{"-i", "31,1"}, func(c *Config) bool { return c.MaxIter == 30 && c.MinIter == 3 }},
		{"interval, banner, json", []string{"-D", "0.5", "-P", "0", "--json", "-j"}, func(c *Config) bool {
			return c.Interval == 500*time.Millisecond && !c.Banner && c.JSON && c.Latency
		}},
		{"instances", []string{"--instances", "4"}, func(c *Config) bool { return c.Instances == 4 }},
		{"instances=", []string{"--instances=3", "--json-stream"}, func(c *Config) bool { return c.Instances == 3 && c.JSONStream }},
		{"units", []string{"-f", "G"}, func(c *Config) bool { return c.Units == 'G' }},
		{"bind both", []string{"-T", "1"}, func(c *Config) bool { return *c.LocalBind == 1 && *c.RemoteBind == 1 }},
		{"bind a pair", []string{"-T0,3"}, func(c *Config) bool { return *c.LocalBind == 0 && *c.RemoteBind == 3 }},
		{"bind here only", []string{"-T", "2,"}, func(c *Config) bool { return *c.LocalBind == 2 && c.RemoteBind == nil }},
		{"bind there only", []string{"-T", ",0"}, func(c *Config) bool { return c.LocalBind == nil && *c.RemoteBind == 0 }},
	}
	for _, tt := range tests {
		c, err := ParseArgs(tt.args)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !tt.check(c) {
			t.Errorf("%s: %+v", tt.name, c)
		}
	}
}

func TestParseArgsErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-t", "SCTP_STREAM"}, {"-l", "0"}, {"-l", "abc"}, {"-H"}, {"-I", "90"}, {"-P", "2"},
		{"-i", "x"}, {"-cx"}, {"stray"}, {"--", "-m", "20M"}, {"-t", "UDP_STREAM", "--", "-m", "70000"},
		{"-t", "TCP_RR", "--", "-r", "0"}, {"-p", "70000"}, {"--instances", "0"}, {"-f", "q"}, {"-H", "h,7"},
		{"-T", ","}, {"-T", "x"}, {"-T", "-1"}, {"-T", "1,99999"},
	} {
		if _, err := ParseArgs(args); err == nil {
			t.Errorf("ParseArgs(%q) accepted", args)
		}
	}
	if _, err := ParseArgs([]string{"-h"}); !IsHelp(err) {
		t.Errorf("-h: %v", err)
	}
}

// The report's config block reads like the rest of the JSON (the -f letter
// as a letter) and reads back into the same options, as the lab does.
func TestConfigJSONRoundTrip(t *testing.T) {
	c, err := ParseArgs([]string{"-H", "10.0.0.1", "-t", "TCP_RR", "-f", "K", "-T", "0,1", "--", "-r", "14,14", "-s", "64K"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"units":"K"`, `"req_size":14`, `"local_sndbuf_requested":65536`, `"targets":[{"host":"10.0.0.1","family":""}]`, `"local_cpu_bind":0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config JSON lacks %s: %s", want, b)
		}
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, c) {
		t.Errorf("read back %+v, want %+v", back, *c)
	}
	if err := json.Unmarshal([]byte(`{"units":"q"}`), &back); err == nil {
		t.Error(`units "q" was accepted`)
	}
}
