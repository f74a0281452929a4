package dataplane

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/vnet-project/vnet/internal/plan"
)

const (
	macVM1        = "02:00:00:00:00:01"
	macVM2        = "02:00:00:00:00:02"
	macHigh       = "fe:00:00:00:00:03" // first byte's top bit set: catches sign-extended compares
	macRemote     = "02:00:00:00:00:99"
	macBcast      = "ff:ff:ff:ff:ff:ff"
	macMcast      = "01:00:5e:00:00:01"
	tcActRedirect = 7
)

func frame(t *testing.T, dst, src string, srcIP, dstIP string) []byte {
	t.Helper()
	d, _ := net.ParseMAC(dst)
	s, _ := net.ParseMAC(src)
	f := make([]byte, 64)
	copy(f[0:], d)
	copy(f[6:], s)
	if srcIP == "" {
		binary.BigEndian.PutUint16(f[12:], 0x0806) // ARP
		return f
	}
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	f[14] = 0x45
	copy(f[26:], net.ParseIP(srcIP).To4())
	copy(f[30:], net.ParseIP(dstIP).To4())
	return f
}

// runSteer loads a program and returns its verdict on a frame. Redirect
// targets are indexes no link has: the kernel's test run reports the
// verdict without sending anything.
func runSteer(t *testing.T, s plan.Steer, ifindex []int, pkt []byte) uint32 {
	t.Helper()
	insns, err := steerProgram(s, ifindex)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, Instructions: insns, License: "GPL"})
	if err != nil {
		t.Fatalf("load: %v\n%v", err, insns)
	}
	defer prog.Close()
	ret, err := prog.Run(&ebpf.RunOptions{Data: pkt})
	if err != nil {
		t.Fatal(err)
	}
	return ret
}

func TestSteerPrograms(t *testing.T) {
	if os.Geteuid() != 0 {
		// nstest.RequireRoot would import this package back.
		t.Skip("SKIPPED: needs root to load BPF programs; CI runs these as root (sudo go test ./...)")
	}
	local := []string{macVM1, macVM2, macHigh}
	out := plan.Steer{Out: true, To: []string{"u1"}, Local: local}
	tests := []struct {
		name    string
		s       plan.Steer
		ifindex []int
		pkt     []byte
		want    uint32
	}{
		{"out: to a local port goes through the bridge", out, []int{90001}, frame(t, macVM2, macVM1, "10.0.0.1", "10.0.0.2"), tcActOK},
		{"out: to a local port with a high MAC", out, []int{90001}, frame(t, macHigh, macVM1, "10.0.0.1", "10.0.0.3"), tcActOK},
		{"out: to the outside is redirected to the uplink", out, []int{90001}, frame(t, macRemote, macVM1, "10.0.0.1", "10.0.0.9"), tcActRedirect},
		{"out: broadcast goes on to the bridge too", out, []int{90001}, frame(t, macBcast, macVM1, "", ""), tcActOK},
		{"out: no uplink up drops what leaves", plan.Steer{Out: true, Local: local}, nil, frame(t, macRemote, macVM1, "10.0.0.1", "10.0.0.9"), tcActShot},
		{"out: iphash redirects", plan.Steer{Out: true, To: []string{"u1", "u2", "u3"}, Local: local}, []int{90001, 90002, 90003},
			frame(t, macRemote, macVM1, "10.0.0.1", "10.0.0.9"), tcActRedirect},
		{"in: our own frame coming back is dropped", plan.Steer{Bcast: true, Local: local}, nil, frame(t, macBcast, macVM2, "", ""), tcActShot},
		{"in: broadcast on the uplink that takes it", plan.Steer{Bcast: true, Local: local}, nil, frame(t, macBcast, macRemote, "", ""), tcActOK},
		{"in: broadcast on another uplink", plan.Steer{Local: local}, nil, frame(t, macBcast, macRemote, "", ""), tcActShot},
		{"in: multicast on another uplink", plan.Steer{Local: local}, nil, frame(t, macMcast, macRemote, "", ""), tcActShot},
		{"in: unicast for a port it serves", plan.Steer{Accept: []string{macHigh}, Local: local}, nil, frame(t, macHigh, macRemote, "10.0.0.9", "10.0.0.3"), tcActOK},
		{"in: unicast for a port another uplink serves", plan.Steer{Bcast: true, Accept: []string{macHigh}, Local: local}, nil, frame(t, macVM1, macRemote, "10.0.0.9", "10.0.0.1"), tcActShot},
		{"in: unknown unicast on the uplink that floods", plan.Steer{Bcast: true, Local: local}, nil, frame(t, macRemote, "02:00:00:00:00:98", "", ""), tcActOK},
		{"in: unknown unicast elsewhere", plan.Steer{Local: local}, nil, frame(t, macRemote, "02:00:00:00:00:98", "", ""), tcActShot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runSteer(t, tt.s, tt.ifindex, tt.pkt); got != tt.want {
				t.Errorf("verdict %d, want %d", got, tt.want)
			}
		})
	}
}

func TestSteerNameRoundTrip(t *testing.T) {
	r := plan.Resource{Kind: plan.KindSteer, Name: "vm1/eth0", Why: "u2: moved by LBT @2026-11-22T10:00:00Z",
		Match: plan.Steer{Out: true, To: []string{"vmnic0", "vmnic1"}, Local: []string{macVM1}}.String()}
	name := steerName(r, []string{"vmnic0", "vmnic1"}, []int{7, 9})
	digest, port, why, targets, ok := parseSteerName(name)
	if !ok || digest != plan.SteerDigest(r.Match) || port != r.Name || why != r.Why || targets["vmnic0"] != 7 || targets["vmnic1"] != 9 {
		t.Errorf("read back %q %q %q %v %v", digest, port, why, targets, ok)
	}
	// tc keeps at most 256 bytes of a cls_bpf name, however many ports the switch has.
	local := make([]string, 200)
	for i := range local {
		local[i] = fmt.Sprintf("02:00:00:00:%02x:%02x", i/256, i%256)
	}
	r.Match = plan.Steer{Out: true, To: []string{"vmnic0", "vmnic1", "vmnic2", "vmnic3"}, Local: local}.String()
	if n := len(steerName(r, []string{"vmnic0", "vmnic1", "vmnic2", "vmnic3"}, []int{10, 11, 12, 13})); n > 255 {
		t.Errorf("a filter name of %d bytes: tc refuses more than 255", n)
	}
}
