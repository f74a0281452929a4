package bpfpolicy

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/vnet-project/vnet/internal/plan"
)

// BenchmarkPrograms reports what the kernel's test runs measure per frame.
func BenchmarkPrograms(b *testing.B) {
	ll, _ := plan.LinkLocal(vmMAC)
	udp := frame(vmMAC, peerMAC, 0x0800, ipv4(peerIP, vmIP, 17, ports(1, 2, 0)))
	udp = append(udp, make([]byte, 30)...)
	acl := func(n int) plan.PortPolicy {
		p := plan.PortPolicy{MAC: vmMAC, GuardMAC: true, GuardRA: true, UnicastOnly: true, Default: plan.ActionDeny}
		for i := 0; i < n; i++ {
			p.Rules = append(p.Rules, plan.PolicyRule{In: true, Proto: "udp", DPort: 20000 + i, Src: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})
		}
		p.Rules = append(p.Rules, plan.PolicyRule{Allow: true, In: true})
		return p
	}
	for _, c := range []struct {
		name string
		p    plan.PortPolicy
	}{
		{"default", plan.PortPolicy{MAC: vmMAC, GuardMAC: true, GuardRA: true, UnicastOnly: true}},
		{"guard", plan.PortPolicy{MAC: vmMAC, GuardMAC: true, GuardRA: true, UnicastOnly: true, GuardIP: true, IPs: []netip.Addr{vmIP, ll}}},
		{"acl-10", acl(10)},
		{"acl-1000", acl(1000)},
	} {
		b.Run(c.name, func(b *testing.B) {
			port := load(b, c.p)
			res, err := port.ToVM.Run(&ebpf.RunOptions{Data: udp, Repeat: uint32(b.N)})
			if err != nil || res != verdictPass {
				b.Fatal(res, err)
			}
		})
	}
}

// BenchmarkLoad is what loading one port's programs costs, the verifier's
// work most of it: a first apply pays it once per port.
func BenchmarkLoad(b *testing.B) {
	ll, _ := plan.LinkLocal(vmMAC)
	for _, c := range []struct {
		name string
		p    plan.PortPolicy
	}{
		{"default", plan.PortPolicy{MAC: vmMAC, GuardMAC: true, GuardRA: true, UnicastOnly: true}},
		{"guard+acl", plan.PortPolicy{MAC: vmMAC, GuardMAC: true, GuardRA: true, UnicastOnly: true, GuardIP: true, IPs: []netip.Addr{vmIP, ll},
			Default: plan.ActionDeny, Rules: []plan.PolicyRule{{Allow: true, In: true, Proto: "tcp", DPort: 443}}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			load(b, c.p) // skips without root
			comp, _ := Compile(c.p)
			for i := 0; i < b.N; i++ {
				p, err := Load(comp, nil)
				if err != nil {
					b.Fatal(err)
				}
				p.Close()
			}
		})
	}
}
