package main

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// portProgs, set by -portprogs, gives each VM's bridge port what vnet's
// port security gives it in the kernel: a clsact hook, a BPF filter on each
// of its two directions running programs shared by every port of the host
// namespace, and the port's entry in the programs' map. The programs are
// trivial (they look the port up and let every frame pass): what is
// compared is the requests, not vnet's rules.
var portProgs bool

// portMapSize bounds the ports the shared map holds, as vnet's does.
const portMapSize = 65536

// sharedProgs are the two programs every port runs and their map.
type sharedProgs struct {
	in, out *ebpf.Program
	ports   *ebpf.Map
}

func (s *sharedProgs) Close() {
	for _, c := range []interface{ Close() error }{s.in, s.out, s.ports} {
		if c != nil {
			_ = c.Close()
		}
	}
}

// loadProgs loads the map and the two programs, for the first port.
func loadProgs() (*sharedProgs, error) {
	ports, err := ebpf.NewMap(&ebpf.MapSpec{Name: "rawnl_ports", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: portMapSize})
	if err != nil {
		return nil, fmt.Errorf("load the port map: %w", err)
	}
	s := &sharedProgs{ports: ports}
	for _, p := range []**ebpf.Program{&s.in, &s.out} {
		if *p, err = ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL", Instructions: lookupAndPass(ports)}); err != nil {
			s.Close()
			return nil, fmt.Errorf("load a port program: %w", err)
		}
	}
	return s, nil
}

// lookupAndPass looks the packet's interface up in the map and lets the
// frame pass (TC_ACT_OK) whatever it finds.
func lookupAndPass(ports *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 40, asm.Word), // skb->ifindex
		asm.StoreMem(asm.RFP, -4, asm.R2, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, ports.FD()),
		asm.FnMapLookupElem.Call(),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	}
}

// findProgs opens the programs a port of the host namespace runs, as a
// new process that did not load them finds them: from one port's filters.
// nil when no port has them.
func findProgs(h *netlink.Handle, port netlink.Link) (*sharedProgs, error) {
	s := &sharedProgs{}
	for parent, p := range map[uint32]**ebpf.Program{netlink.HANDLE_MIN_INGRESS: &s.in, netlink.HANDLE_MIN_EGRESS: &s.out} {
		fs, err := h.FilterList(port, parent)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("tc filter show dev %s: %w", port.Attrs().Name, err)
		}
		for _, f := range fs {
			if bf, ok := f.(*netlink.BpfFilter); ok && bf.Id != 0 {
				if *p, err = ebpf.NewProgramFromID(ebpf.ProgramID(bf.Id)); err != nil {
					s.Close()
					return nil, err
				}
				break
			}
		}
	}
	if s.in == nil || s.out == nil {
		s.Close()
		return nil, nil
	}
	info, err := s.in.Info()
	if err != nil {
		s.Close()
		return nil, err
	}
	ids, ok := info.MapIDs()
	if !ok || len(ids) == 0 {
		s.Close()
		return nil, errors.New("the port program names no map")
	}
	if s.ports, err = ebpf.NewMapFromID(ids[0]); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// hookPort writes the port's entry and puts the programs on its hooks.
func hookPort(h *netlink.Handle, s *sharedProgs, link netlink.Link) error {
	index := link.Attrs().Index
	if err := s.ports.Put(uint32(index), uint64(index)); err != nil {
		return fmt.Errorf("port map entry of %s: %w", link.Attrs().Name, err)
	}
	clsact := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if err := h.QdiscAdd(clsact); err != nil {
		return fmt.Errorf("tc qdisc add dev %s clsact: %w", link.Attrs().Name, err)
	}
	for parent, prog := range map[uint32]*ebpf.Program{netlink.HANDLE_MIN_INGRESS: s.in, netlink.HANDLE_MIN_EGRESS: s.out} {
		f := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: index, Parent: parent, Handle: 1, Priority: 1, Protocol: unix.ETH_P_ALL},
			Fd: prog.FD(), Name: "rawnl", DirectAction: true}
		if err := h.FilterAdd(f); err != nil {
			return fmt.Errorf("tc filter add dev %s bpf: %w", link.Attrs().Name, err)
		}
	}
	return nil
}

// securePort hooks VM i's port: with the programs this process loaded
// (s, the first port's), else those port 1 runs.
func securePort(h *netlink.Handle, s **sharedProgs, link netlink.Link) error {
	if *s == nil {
		first, err := h.LinkByName(port(1))
		if err == nil {
			*s, err = findProgs(h, first)
		}
		if err != nil && !errors.As(err, new(netlink.LinkNotFoundError)) {
			return err
		}
	}
	if *s == nil {
		var err error
		if *s, err = loadProgs(); err != nil {
			return err
		}
	}
	return hookPort(h, *s, link)
}

// unsecurePort forgets a port's entry before its link goes (its hooks go
// with it).
func unsecurePort(h *netlink.Handle, link netlink.Link) error {
	first, err := h.LinkByName(port(1))
	if err != nil {
		return err
	}
	s, err := findProgs(h, first)
	if err != nil || s == nil {
		return err
	}
	defer s.Close()
	if err := s.ports.Delete(uint32(link.Attrs().Index)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("forget port %s: %w", link.Attrs().Name, err)
	}
	return nil
}
