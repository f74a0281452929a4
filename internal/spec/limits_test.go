package spec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// limitsBase is a valid spec that each case of TestLimits changes in one
// place. Its lines, which the cases' wanted positions count on:
//
//	9 ioc:     12 portgroups   15 average   16 burst   20 cpus   22 the vNIC   24 the host port
const limitsBase = `name: t
hosts:
  - name: esx1
    nics:
      - {name: vmnic0, speed: 1Gbit}
switches:
  - name: dvs0
    mtu: 1500
    ioc: {enabled: true, pools: {vm: {shares: high, limit: 800Mbit, reservation: 100Mbit}}}
    uplinks:
      - {name: up1, nics: {esx1: vmnic0}}
    portgroups:
      - name: pg
        shaping:
          egress: {average: 100Mbit, peak: 200Mbit,
                   burst: 100KiB}
vms:
  - name: vm1
    host: esx1
    cpus: 1
    nics:
      - {portgroup: pg, ip: 10.0.0.1/24, mtu: 1500, mac: "02:00:00:00:00:01"}
hostports:
  - {host: esx1, portgroup: pg, ip: 10.0.0.2/24, name: vmk0}
`

func TestLimitsBaseIsValid(t *testing.T) {
	if _, err := Load("base", []byte(limitsBase)); err != nil {
		t.Fatal(err)
	}
}

// Each case replaces one piece of limitsBase; the spec must be refused with
// an error naming the field path and line, or, with want "", accepted.
func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		// CPU limits: finite, 0.01..1024, a written 0 is not "no limit".
		{"cpus inf", "cpus: 1", "cpus: .inf", `vms[0].cpus: want a finite number, got ".inf" (line 20:11)`},
		{"cpus -inf", "cpus: 1", "cpus: -.inf", `vms[0].cpus: want a finite number`},
		{"cpus nan", "cpus: 1", "cpus: .nan", `vms[0].cpus: want a finite number, got ".nan" (line 20`},
		{"cpus 1e19", "cpus: 1", "cpus: 1e19", "vms[0].cpus: cpus must be 0.01..1024 cores (or left out for no limit), got 1e+19 (line 20"},
		{"cpus 1e9", "cpus: 1", "cpus: 1e9", "vms[0].cpus: cpus must be 0.01..1024 cores"},
		{"cpus 0", "cpus: 1", "cpus: 0", "vms[0].cpus: 0 would be taken for the field left out, and its default used: give a value, or leave the field out (line 20"},
		{"cpus 0.0001", "cpus: 1", "cpus: 0.0001", "vms[0].cpus: cpus must be 0.01..1024 cores"},
		{"cpus negative", "cpus: 1", "cpus: -1", "vms[0].cpus: cpus must be 0.01..1024 cores"},
		{"cpus text", "cpus: 1", "cpus: lots", `vms[0].cpus: want a number, got "lots"`},
		{"cpus 0.01", "cpus: 1", "cpus: 0.01", ""},
		{"cpus 1024", "cpus: 1", "cpus: 1024", ""},
		{"cpus null", "cpus: 1", "cpus: ~", ""},

		// Reserved and malformed interface names.
		{"switch all", "name: dvs0", "name: all", `switches[0].name: name "all" is reserved by the kernel for settings of all interfaces (line 7`},
		{"switch default", "name: dvs0", "name: default", `switches[0].name: name "default" is reserved`},
		{"nic default", "name: vmnic0", "name: default", `hosts[0].nics[0].name: name "default" is reserved`},
		{"host port all", "name: vmk0", "name: all", `hostports[0].name: name "all" is reserved`},
		{"switch dot", "name: dvs0", "name: .", `switches[0].name: name "." is not a valid interface name`},
		{"switch dotdot", "name: dvs0", "name: ..", `switches[0].name: name ".." is not a valid interface name`},
		{"switch slash", "name: dvs0", "name: a/b", `switches[0].name: name "a/b" is not a valid interface name`},
		{"switch space", "name: dvs0", `name: "a b"`, `switches[0].name: name "a b" is not a valid interface name`},
		{"switch colon", "name: dvs0", `name: "a:b"`, `switches[0].name: name "a:b" is not a valid interface name`},
		{"switch 16 bytes", "name: dvs0", "name: abcdefghijklmnop", `switches[0].name: name "abcdefghijklmnop" is longer than 15 characters`},
		{"switch 15 bytes", "name: dvs0", "name: abcdefghijklmno", ""},
		{"switch ALL is a name", "name: dvs0", "name: ALL", ""},

		// Rates within 8Kbit..1Tbit.
		{"speed 1bit", "speed: 1Gbit", "speed: 1bit", "hosts[0].nics[0].speed: rate 1bit is outside 8Kbit..1Tbit (line 5"},
		{"speed 7999bit", "speed: 1Gbit", "speed: 7999bit", "hosts[0].nics[0].speed: rate 7.999Kbit is outside"},
		{"speed 8Kbit", "speed: 1Gbit", "speed: 8Kbit", "admission control"}, // the rate passes; the reservation is too large for it
		{"reservation 8Kbit", "reservation: 100Mbit", "reservation: 8Kbit", ""},
		{"speed 1Tbit", "speed: 1Gbit", "speed: 1Tbit", ""},
		{"speed 2Tbit", "speed: 1Gbit", "speed: 2Tbit", "hosts[0].nics[0].speed: rate 2Tbit is outside 8Kbit..1Tbit"},
		{"speed huge", "speed: 1Gbit", "speed: 100000000000000000000Tbit", `hosts[0].nics[0].speed: rate "100000000000000000000Tbit": too large`},
		{"limit 1bit", "limit: 800Mbit", "limit: 1bit", "switches[0].ioc.pools.vm.limit: rate 1bit is outside 8Kbit..1Tbit (line 9"},
		{"reservation 1bit", "reservation: 100Mbit", "reservation: 1bit", "switches[0].ioc.pools.vm.reservation: rate 1bit is outside"},
		{"average 1bit", "average: 100Mbit", "average: 1bit", "switches[0].portgroups[0].shaping.egress.average: rate 1bit is outside 8Kbit..1Tbit (line 15"},
		{"peak 2Tbit", "peak: 200Mbit", "peak: 2Tbit", "switches[0].portgroups[0].shaping.egress.peak: rate 2Tbit is outside"},

		// Bursts the kernel's token bucket holds.
		{"burst 1KiB", "burst: 100KiB", "burst: 1KiB", "switches[0].portgroups[0].shaping.egress.burst: burst 1KiB is smaller than two frames (line 16"},
		{"burst 2GiB", "burst: 100KiB", "burst: 2GiB", "shaping.egress.burst: burst 2GiB is larger than 1GiB"},
		{"burst 5 s", "burst: 100KiB", "burst: 62500000", "shaping.egress.burst: burst 62500000B lasts more than 4s at the average 100Mbit (at most 50000000B)"},
		{"burst 4 s", "burst: 100KiB", "burst: 50000000", ""},

		// Whole numbers.
		{"mtu fraction", "mtu: 1500,", "mtu: 1500.5,", `vms[0].nics[0].mtu: want a whole number, got "1500.5" (line 22`},
		{"mtu exponent", "mtu: 1500\n", "mtu: 1.5e3\n", `switches[0].mtu: want a whole number, got "1.5e3" (line 8`},
		{"mtu inf", "mtu: 1500\n", "mtu: .inf\n", `switches[0].mtu: want a whole number, got ".inf"`},
		{"mtu too large", "mtu: 1500\n", "mtu: 99999999999999999999\n", `switches[0].mtu: want a whole number`},
		{"mtu quoted", "mtu: 1500\n", "mtu: \"1500\"\n", `switches[0].mtu: want a whole number, got "1500"`},
		{"mtu hex", "mtu: 1500\n", "mtu: 0x5dc\n", ""},

		// Addresses and MACs a NIC can have.
		{"zero MAC", `"02:00:00:00:00:01"`, `"00:00:00:00:00:00"`, "vms[0].nics[0].mac: 00:00:00:00:00:00 is the zero address, which the kernel refuses for a NIC (line 22"},
		{"multicast MAC", `"02:00:00:00:00:01"`, `"01:00:5e:00:00:01"`, "vms[0].nics[0].mac: 01:00:5e:00:00:01 is a multicast address"},
		{"broadcast MAC", `"02:00:00:00:00:01"`, `"ff:ff:ff:ff:ff:ff"`, "is a multicast address"},
		{"prefix /0", "10.0.0.1/24", "10.0.0.1/0", "vms[0].nics[0].ip: 10.0.0.1/0: prefix length /0 would put the whole address space on the link (line 22"},
		{"host port /0", "10.0.0.2/24", "10.0.0.2/0", "hostports[0].ip: 10.0.0.2/0: prefix length /0"},
		{"IPv6 /0", "10.0.0.1/24", "fd00::1/0", "vms[0].nics[0].ip: fd00::1/0: prefix length /0"},
		{"prefix /32", "10.0.0.1/24", "10.0.0.1/32", ""},

		// Duplicate keys, with both lines.
		{"duplicate pool", "pools: {vm: {", "pools: {vm: {shares: low}, vm: {", `switches[0].ioc.pools.vm: key "vm" given twice (first at line 9) (line 9`},
		{"duplicate uplink host", "nics: {esx1: vmnic0}", "nics: {esx1: vmnic0,\n               esx1: vmnic0}", `switches[0].uplinks[0].nics.esx1: key "esx1" given twice (first at line 11) (line 12`},
		{"duplicate field", "    cpus: 1\n", "    cpus: 1\n    cpus: 2\n", "vms[0].cpus: field given twice (first at line 20) (line 21"},
		{"mapping as key", "pools: {vm: {", "pools: {[vm]: {", "switches[0].ioc.pools: a key must be a single value, not a list (line 9"},

		// Values and aliases.
		{"threshold nan", "    mtu: 1500\n", "    mtu: 1500\n    teaming: {policy: loadbased, lbt: {threshold: nan}}\n", `switches[0].teaming.lbt.threshold: percentage "nan": want a number above 0`},
		{"alias cycle", "hosts:\n", "hosts: &h\n  - *h\n", "the value anchored &h contains an alias to itself"},
		{"alias to a scalar", "cpus: 1", "cpus: &c 2", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(limitsBase, tc.old) {
				t.Fatalf("%q is not in the base spec", tc.old)
			}
			src := strings.Replace(limitsBase, tc.old, tc.new, 1)
			_, err := Load("t.yaml", []byte(src))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("accepted; want %q", tc.want)
			case !errors.Is(err, ErrInvalid):
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			case !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error:\n%v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// A huge value, key or name is refused with a clipped quote, not echoed
// whole.
func TestLongValuesAreClipped(t *testing.T) {
	huge := strings.Repeat("x", 300<<10)
	for _, tc := range []struct{ name, src, want string }{
		{"name", "name: " + huge + "\n", `name: value "` + strings.Repeat("x", 64) + `…(307200 bytes)" is longer than 256 bytes (line 1:7)`},
		{"key", "name: t\n" + strings.Repeat("k", 300) + ": 1\n", `key "` + strings.Repeat("k", 64) + `…(300 bytes)" is longer than 256 bytes (line 2:1)`},
		{"unknown field", "name: t\n" + strings.Repeat("y", 200) + ": 1\n", `: unknown field (known:`},
		{"rate", "name: t\nhosts: [{name: h, nics: [{name: n, speed: " + strings.Repeat("9", 200) + "Gbit}]}]\n", `hosts[0].nics[0].speed: rate "` + strings.Repeat("9", 64) + `…(204 bytes)": too large`},
		{"host name", "name: t\nvms: [{name: v, host: " + strings.Repeat("h", 200) + "}]\n", `vms[0].host: unknown host "` + strings.Repeat("h", 64) + `…(200 bytes)"`},
		{"anchor", "name: *" + strings.Repeat("a", 10000) + "\n", "unknown anchor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("t.yaml", []byte(tc.src))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%.500s\nwant it to contain %q", err, tc.want)
			}
			if len(err.Error()) > 1000 {
				t.Errorf("error is %d bytes long: %.300s...", len(err.Error()), err)
			}
		})
	}
}

func TestClipKeepsWholeCharacters(t *testing.T) {
	s := strings.Repeat("é", 40) // 80 bytes, 2 each
	got := clip(s)
	if want := strings.Repeat("é", 32) + "…(80 bytes)"; got != want {
		t.Errorf("clip = %q, want %q", got, want)
	}
	if got := clip("short"); got != "short" {
		t.Errorf("clip(short) = %q", got)
	}
}

// Errors lists the first MaxReported problems and counts the rest.
func TestErrorsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: t\nvms:\n")
	for i := range 100 {
		fmt.Fprintf(&b, "  - {name: v%d, host: nowhere}\n", i)
	}
	_, err := Load("t.yaml", []byte(b.String()))
	var es Errors
	if !errors.As(err, &es) || len(es) != 100 {
		t.Fatalf("want all 100 problems kept, got %d: %v", len(es), err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != MaxReported+1 || lines[MaxReported] != "... and 80 more problems" {
		t.Errorf("error has %d lines, the last %q", len(lines), lines[len(lines)-1])
	}
}

func TestTooLargeSpec(t *testing.T) {
	big := "name: t\n" + strings.Repeat("# padding\n", MaxSpecBytes/10+1)
	_, err := Load("t.yaml", []byte(big))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("the spec is larger than %d KiB", MaxSpecBytes>>10)) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	f := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(f, []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(f); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("LoadFile: %v", err)
	}
	// A file that never ends is not read to its end.
	if _, err := LoadFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("LoadFile(/dev/zero): %v", err)
	}
}

// An alias repeated many times over stands for more values than vnet reads:
// the load stops at MaxValues, quickly, and says why.
func TestAliasBombFailsFast(t *testing.T) {
	for _, n := range []int{500, 1000} {
		src := aliasBomb(n)
		var err error
		// CPU time of the load's own thread: wall time on a machine
		// busy with other work swung past the bound below.
		took := timed(func() { _, err = Load("bomb.yaml", []byte(src)) })
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d values once its aliases (*name) are expanded", MaxValues)) {
			t.Fatalf("%d x %d (%d bytes): err = %.500v", n, n, len(src), err)
		}
		if lines := strings.Count(err.Error(), "\n") + 1; lines > MaxReported+1 {
			t.Errorf("%d lines of errors", lines)
		}
		t.Logf("%d x %d: %d bytes refused in %v", n, n, len(src), took)
		// Far above what it takes (well under a second); the unbounded
		// decoder took minutes.
		if took > 5*time.Second {
			t.Errorf("%d x %d: took %v", n, n, took)
		}
	}
}

// When a bomb also has many errors, the reason the load stopped still comes
// first.
func TestValueLimitIsReportedFirst(t *testing.T) {
	src := strings.Replace(aliasBomb(1000), "speed: 1Gbit", "speed: 1Gbit, bogus: 1", 1)
	_, err := Load("bomb.yaml", []byte(src))
	if err == nil || !strings.HasPrefix(err.Error(), "hosts[") || !strings.Contains(strings.Split(err.Error(), "\n")[0], fmt.Sprintf("more than %d values", MaxValues)) {
		t.Fatalf("err = %.300v", err)
	}
	if !strings.Contains(err.Error(), "unknown field") || !strings.Contains(err.Error(), "more problems") {
		t.Errorf("err = %.2000v", err)
	}
}

// aliasBomb is a spec of n hosts with n NICs each, in a few KB: one host
// anchored and aliased n-1 times, its NIC list one NIC aliased n-1 times.
func aliasBomb(n int) string {
	var b strings.Builder
	b.WriteString("name: bomb\nhosts:\n  - &h {name: h, nics: [&n {name: vmnic0, speed: 1Gbit}")
	b.WriteString(strings.Repeat(", *n", n-1))
	b.WriteString("]}\n")
	b.WriteString(strings.Repeat("  - *h\n", n-1))
	return b.String()
}

// Validation costs about the size of the spec: eight times the objects take
// about eight times as long (somewhat more, as maps outgrow caches), not
// sixty-four. The two sizes run in turns, so that a busy moment of the host
// slows both, and each figure is the best of several runs; the bound leaves
// room for the rest of the noise.
func TestValidationScalesLinearly(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	small, large := manyObjects(t, 300), manyObjects(t, 2400)
	ts, tl := time.Duration(1<<63-1), time.Duration(1<<63-1)
	for range 9 {
		ts = min(ts, timed(func() { Validate(small) }))
		tl = min(tl, timed(func() { Validate(large) }))
	}
	t.Logf("300 hosts: %v, 2400 hosts: %v", ts, tl)
	if tl > 32*ts { // half of what a cost that grows with the square would give
		t.Errorf("8x the objects took %.1fx as long (%v vs %v)", float64(tl)/float64(ts), tl, ts)
	}
}

// manyObjects is a valid spec with n hosts on one distributed switch, a VM on
// each, and a host port on each.
func manyObjects(t *testing.T, n int) *Document {
	var b strings.Builder
	b.WriteString("name: big\nhosts:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: h%d, nics: [{name: n0, speed: 1Gbit}]}\n", i)
	}
	b.WriteString("switches:\n  - name: dvs\n    uplinks:\n      - name: u\n        nics: {")
	for i := range n {
		fmt.Fprintf(&b, "h%d: n0, ", i)
	}
	b.WriteString("}\n    portgroups: [{name: pg}]\nvms:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: v%d, host: h%d, nics: [{portgroup: pg, ip: 10.1.%d.%d/8}]}\n", i, i, i/250, i%250+1)
	}
	b.WriteString("hostports:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {host: h%d, portgroup: pg, ip: 10.2.%d.%d/8}\n", i, i/250, i%250+1)
	}
	doc, err := Load("big.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// timed is the CPU time f takes on this goroutine's own thread, with the
// collector held off: wall-clock time on a machine shared with other work
// swings by more than the factor the test looks for, and CPU time on one
// thread does not count what other processes or the collector's workers do.
func timed(f func()) time.Duration {
	runtime.GC() // not to charge one run with the garbage of another
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	f()
	return threadCPU() - start
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime: %v", err))
	}
	return time.Duration(ts.Nano())
}
