package bpfpolicy

import (
	"net/netip"
	"testing"

	"github.com/vnet-project/vnet/internal/plan"
)

// benchPolicies are the policies whose cost the benchmarks report: vnet's
// default, with the IP guard, and ACLs of 10 and 1,000 rules that never
// match before the allow that does.
func benchPolicies() []struct {
	name string
	p    plan.PortPolicy
} {
	ll, _ := plan.LinkLocal(vmMAC)
	acl := func(n int) plan.PortPolicy {
		p := plan.PortPolicy{MAC: vmMAC, GuardMAC: true, GuardRA: true, UnicastOnly: true, Default: plan.ActionDeny}
		for i := 0; i < n; i++ {
			p.Rules = append(p.Rules, plan.PolicyRule{In: true, Proto: "udp", DPort: 20000 + i, Src: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})
		}
		p.Rules = append(p.Rules, plan.PolicyRule{Allow: true, In: true})
		return p
	}
	return []struct {
		name string
		p    plan.PortPolicy
	}{
		{"default", plan.PortPolicy{MAC: vmMAC, GuardMAC: true, GuardRA: true, UnicastOnly: true}},
		{"guard", plan.PortPolicy{MAC: vmMAC, GuardMAC: true, GuardRA: true, UnicastOnly: true, GuardIP: true, IPs: []netip.Addr{vmIP, ll}}},
		{"acl-10", acl(10)},
		{"acl-1000", acl(1000)},
	}
}

// BenchmarkPrograms reports what the kernel's test runs measure per frame:
// a UDP frame the bridge sends a port (to-vm, the bridge's way), and one a
// port's VM sends another VM of its bridge that takes frames directly
// (fast-path: the sender's checks, the receiver's, and the hand-over),
// both ports with the policy's checks, the receiver with its ACL. The
// frame is a known connection's, as all but the first of a flow are.
func BenchmarkPrograms(b *testing.B) {
	udpIn := frame(vmMAC, peerMAC, 0x0800, ipv4(peerIP, vmIP, 17, ports(1, 2, 0)))
	udpIn = append(udpIn, make([]byte, 30)...)
	udpOut := frame(peerMAC, vmMAC, 0x0800, ipv4(vmIP, peerIP, 17, ports(2, 1, 0)))
	udpOut = append(udpOut, make([]byte, 30)...)
	const bridge, peerPort = 9, 1000
	for _, c := range benchPolicies() {
		b.Run(c.name+"/to-vm", func(b *testing.B) {
			progs := load(b, c.p)
			run(b, progs, progs.ToVM, udpIn, 1) // the connection's first packet
			if got := run(b, progs, progs.ToVM, udpIn, b.N); got != verdictPass {
				b.Fatal(got)
			}
		})
		b.Run(c.name+"/fast-path", func(b *testing.B) {
			progs := testPrograms(b)
			// The sender has the policy's checks; an ACL (default deny,
			// allowing only what comes in) is the receiver's.
			sender := c.p
			sender.Default, sender.Rules = "", nil
			setPort(b, progs, testPort, sender, bridge)
			peer := c.p
			peer.MAC, peer.Direct = peerMAC, true
			if peer.GuardIP {
				peer.IPs = []netip.Addr{peerIP}
			}
			setPort(b, progs, peerPort, peer, bridge)
			if err := progs.SetFastPath(true); err != nil {
				b.Fatal(err)
			}
			run(b, progs, progs.FromVM, udpOut, 1)
			if got := run(b, progs, progs.FromVM, udpOut, b.N); got != verdictRedirect {
				b.Fatal(got)
			}
		})
	}
}

// BenchmarkLoad is what loading the programs costs, the verifier's work
// most of it: once per host namespace and command that sets a port's
// policy there, when the namespace runs no programs of this build yet.
func BenchmarkLoad(b *testing.B) {
	testPrograms(b) // skips without root
	for i := 0; i < b.N; i++ {
		p, err := Load(nil)
		if err != nil {
			b.Fatal(err)
		}
		p.Close()
	}
}

// BenchmarkSet is what setting one port's policy costs, once the programs
// are loaded: what a first apply pays per port.
func BenchmarkSet(b *testing.B) {
	for _, c := range benchPolicies()[:3] {
		b.Run(c.name, func(b *testing.B) {
			progs := testPrograms(b)
			comp, err := Compile(c.p)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				port := uint32(2 + i%MaxPorts)
				if err := progs.Set(port, comp, 0, nil); err != nil {
					b.Fatal(err)
				}
				if i%MaxPorts == MaxPorts-1 {
					b.StopTimer()
					for p := uint32(2); p < 2+MaxPorts; p++ {
						progs.Remove(p)
					}
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkSetStaged is what setting a port's policy costs when an apply
// sets 100 ports' at once (the dataplane's batch of port program steps):
// Stage for the 100, then each one's Set; per port.
func BenchmarkSetStaged(b *testing.B) {
	const batch = 100
	for _, c := range benchPolicies()[2:3] {
		b.Run(c.name, func(b *testing.B) {
			progs := testPrograms(b)
			comp, err := Compile(c.p)
			if err != nil {
				b.Fatal(err)
			}
			next := uint32(2)
			for done := 0; done < b.N; done += batch {
				if next+batch >= 2+MaxPorts {
					b.StopTimer()
					for p := uint32(2); p < next; p++ {
						progs.Remove(p)
					}
					next = 2
					b.StartTimer()
				}
				var ports []Staged
				for i := uint32(0); i < batch; i++ {
					ports = append(ports, Staged{Port: next + i, Policy: comp})
				}
				progs.Defer()
				if err := progs.Stage(ports); err != nil {
					b.Fatal(err)
				}
				for _, s := range ports {
					if err := progs.Set(s.Port, comp, 0, nil); err != nil {
						b.Fatal(err)
					}
				}
				progs.Flush()
				next += batch
			}
		})
	}
}
