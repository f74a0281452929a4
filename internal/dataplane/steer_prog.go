package dataplane

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf/asm"

	"github.com/vnet-project/vnet/internal/plan"
)

// tc verdicts a direct-action classifier returns.
const (
	tcActOK   = 0
	tcActShot = 2
)

// Frame offsets the programs read (Ethernet, then IPv4 without options).
const (
	offDstMAC    = 0
	offSrcMAC    = 6
	offEtherType = 12
	offIPv4Src   = 26
	offIPv4Dst   = 30
	etherTypeIP  = 0x0800
)

// progBuilder assembles straight-line BPF with forward labels. LD_ABS
// keeps the programs short: it bounds-checks the read itself and ends the
// program with verdict 0 (pass) on a runt frame, which is the safe answer.
type progBuilder struct {
	insns   asm.Instructions
	pending string
	labels  int
	jumped  map[string]bool // labels some instruction refers to
}

func (b *progBuilder) emit(ins ...asm.Instruction) {
	for _, in := range ins {
		if b.pending != "" {
			in = in.WithSymbol(b.pending)
			b.pending = ""
		}
		if ref := in.Reference(); ref != "" {
			if b.jumped == nil {
				b.jumped = map[string]bool{}
			}
			b.jumped[ref] = true
		}
		b.insns = append(b.insns, in)
	}
}

// label names the next instruction emitted. An instruction carries one
// name, so a second label in a row first gets a no-op to sit on.
func (b *progBuilder) label(name string) {
	if b.pending != "" {
		b.emit(asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource)}) // ja +0
	}
	b.pending = name
}

func (b *progBuilder) fresh(prefix string) string {
	b.labels++
	return fmt.Sprintf("%s%d", prefix, b.labels)
}

// loadMAC puts the MAC at off in R7 (first four bytes) and R8 (last two).
func (b *progBuilder) loadMAC(off int32) {
	b.emit(asm.LoadAbs(off, asm.Word), asm.Mov.Reg(asm.R7, asm.R0),
		asm.LoadAbs(off+4, asm.Half), asm.Mov.Reg(asm.R8, asm.R0))
}

// jumpIfMAC jumps to target when R7/R8 hold one of macs. Each compare is a
// 64-bit load and a register compare: an immediate compare would sign-extend
// MACs whose first byte has its top bit set.
func (b *progBuilder) jumpIfMAC(macs []string, target string) error {
	for _, m := range macs {
		hw, err := net.ParseMAC(m)
		if err != nil || len(hw) != 6 {
			return fmt.Errorf("steering: bad MAC %q", m)
		}
		hi := int64(hw[0])<<24 | int64(hw[1])<<16 | int64(hw[2])<<8 | int64(hw[3])
		lo := int64(hw[4])<<8 | int64(hw[5])
		skip := b.fresh("mac")
		b.emit(asm.LoadImm(asm.R1, hi, asm.DWord), asm.JNE.Reg(asm.R7, asm.R1, skip),
			asm.LoadImm(asm.R1, lo, asm.DWord), asm.JEq.Reg(asm.R8, asm.R1, target))
		b.label(skip)
	}
	return nil
}

// chooseUplink leaves in R9 the interface index a frame leaves by: the only
// one, or for several a hash of the IPv4 source and destination (non-IP
// frames such as ARP take the first). It clobbers R7.
func (b *progBuilder) chooseUplink(ifindex []int) {
	b.emit(asm.Mov.Imm(asm.R9, int32(ifindex[0])))
	if len(ifindex) == 1 {
		return
	}
	done := b.fresh("chosen")
	b.emit(asm.LoadAbs(offEtherType, asm.Half), asm.JNE.Imm(asm.R0, etherTypeIP, done),
		asm.LoadAbs(offIPv4Src, asm.Word), asm.Mov.Reg(asm.R7, asm.R0),
		asm.LoadAbs(offIPv4Dst, asm.Word), asm.Xor.Reg(asm.R7, asm.R0),
		// Fold to a byte so every address bit counts, as switches' IP hashes do.
		asm.Mov.Reg(asm.R0, asm.R7), asm.RSh.Imm(asm.R0, 16), asm.Xor.Reg(asm.R7, asm.R0),
		asm.Mov.Reg(asm.R0, asm.R7), asm.RSh.Imm(asm.R0, 8), asm.Xor.Reg(asm.R7, asm.R0),
		asm.And.Imm(asm.R7, 0xff), asm.Mod.Imm(asm.R7, int32(len(ifindex))))
	for k := 1; k < len(ifindex); k++ {
		next := b.fresh("idx")
		b.emit(asm.JNE.Imm(asm.R7, int32(k), next), asm.Mov.Imm(asm.R9, int32(ifindex[k])), asm.Ja.Label(done))
		b.label(next)
	}
	b.label(done)
}

// verdicts ends the program with the verdicts it jumps to; the verifier
// refuses code no path reaches.
func (b *progBuilder) verdicts() {
	for _, v := range []struct {
		label string
		code  int32
	}{{"pass", tcActOK}, {"shot", tcActShot}} {
		if b.jumped[v.label] {
			b.label(v.label)
			b.emit(asm.Mov.Imm(asm.R0, v.code), asm.Return())
		}
	}
}

// steerProgram compiles a steering program; ifindex gives the interface
// index of each NIC the program redirects to.
func steerProgram(s plan.Steer, ifindex []int) (asm.Instructions, error) {
	b := &progBuilder{}
	b.emit(asm.Mov.Reg(asm.R6, asm.R1)) // LD_ABS reads the packet through R6
	var err error
	if s.Out {
		err = b.outbound(ifindex, s.Local)
	} else {
		err = b.inbound(s)
	}
	if err != nil {
		return nil, err
	}
	b.verdicts()
	return b.insns, nil
}

// outbound runs on a port's frames as they enter the switch. Frames for
// local ports go on through the bridge. Frames for the outside go straight
// to the port's uplink; broadcast and multicast go both ways: a copy to the
// uplink, the frame to the bridge, which floods it to local ports only.
func (b *progBuilder) outbound(ifindex []int, local []string) error {
	b.emit(asm.LoadAbs(offDstMAC, asm.Byte), asm.JSet.Imm(asm.R0, 1, "flood"))
	b.loadMAC(offDstMAC)
	if err := b.jumpIfMAC(local, "pass"); err != nil {
		return err
	}
	if len(ifindex) == 0 {
		b.emit(asm.Ja.Label("shot")) // no uplink is up: the outside is unreachable
	} else {
		b.chooseUplink(ifindex)
		b.emit(asm.Mov.Reg(asm.R1, asm.R9), asm.Mov.Imm(asm.R2, 0), asm.FnRedirect.Call(), asm.Return())
	}
	b.label("flood")
	if len(ifindex) > 0 {
		b.chooseUplink(ifindex)
		b.emit(asm.Mov.Reg(asm.R1, asm.R6), asm.Mov.Reg(asm.R2, asm.R9), asm.Mov.Imm(asm.R3, 0), asm.FnCloneRedirect.Call())
	}
	b.emit(asm.Ja.Label("pass"))
	return nil
}

// inbound runs on frames an uplink brings from the physical switch. It
// drops the switch's own frames coming back, unicast for a local port that
// another uplink serves, and, unless this uplink is the one that takes
// them, broadcast, multicast and unknown unicast.
func (b *progBuilder) inbound(s plan.Steer) error {
	b.loadMAC(offSrcMAC)
	if err := b.jumpIfMAC(s.Local, "shot"); err != nil {
		return err
	}
	b.emit(asm.LoadAbs(offDstMAC, asm.Byte), asm.JSet.Imm(asm.R0, 1, "flood"))
	b.loadMAC(offDstMAC)
	if err := b.jumpIfMAC(s.Accept, "pass"); err != nil {
		return err
	}
	if err := b.jumpIfMAC(s.Local, "shot"); err != nil {
		return err
	}
	b.label("flood")
	if s.Bcast {
		b.emit(asm.Ja.Label("pass"))
	} else {
		b.emit(asm.Ja.Label("shot"))
	}
	return nil
}
