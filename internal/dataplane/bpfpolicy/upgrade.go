package bpfpolicy

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Tags are the kernel's tags of FromVM and ToVM: digests of their code,
// which programs of another build of vnet with the same maps differ in.
func (p *Programs) Tags() (fromVM, toVM string, err error) {
	if fromVM, err = tagOf(p.FromVM); err != nil {
		return "", "", err
	}
	toVM, err = tagOf(p.ToVM)
	return fromVM, toVM, err
}

func tagOf(prog *ebpf.Program) (string, error) {
	info, err := prog.Info()
	if err != nil {
		return "", fmt.Errorf("read port program's tag: %w", err)
	}
	return info.Tag, nil
}

// ErrIncompatible is a set of programs whose maps this build's programs
// cannot share: their ports' policies cannot be handed on in place.
var ErrIncompatible = errors.New("port programs' maps differ from this build's")

// Successor loads this build's programs on all of p's maps, for the ports
// that run p to be switched to: both sets then read the same settings,
// rules, counters and flow tables, so a port enforces the same policy,
// and keeps its connections and counts, whichever it runs. It fails with
// ErrIncompatible when a map of p has another layout than this build's.
func (p *Programs) Successor() (*Programs, error) {
	spec, err := collectionSpec()
	if err != nil {
		return nil, err
	}
	for name, m := range p.shared() {
		if m == nil {
			return nil, fmt.Errorf("%w: no map %q", ErrIncompatible, name)
		}
		if err := spec.Maps[name].Compatible(m); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrIncompatible, err)
		}
	}
	return Load(p)
}

// Sharers lists the programs other than p's own that use p's maps: those
// of another build that ports still run (a namespace being switched to
// new programs, see Successor). It looks at every program of the machine,
// once each.
func (p *Programs) Sharers() ([]ebpf.ProgramID, error) {
	portsInfo, err := p.ports.Info()
	if err != nil {
		return nil, fmt.Errorf("read the port programs' map: %w", err)
	}
	ports, _ := portsInfo.ID()
	from, to := p.IDs()
	return loadedPrograms(func(id ebpf.ProgramID, info *ebpf.ProgramInfo) bool {
		maps, _ := info.MapIDs()
		return id != from && id != to && slices.Contains(maps, ports)
	})
}

// LoadOther loads programs as a build of vnet with other code and the
// same maps would: this build's with one more instruction at the start
// of each, on the maps of reuse. Tests use it to stand for an older build.
func LoadOther(reuse *Programs) (*Programs, error) {
	spec, err := collectionSpec()
	if err != nil {
		return nil, err
	}
	other := spec.Copy()
	for _, name := range []string{"port_from_vm", "port_to_vm"} {
		insns := other.Programs[name].Instructions
		if len(insns) == 0 || insns[0].Reference() != "" || insns[0].IsLoadFromMap() {
			return nil, fmt.Errorf("program %s does not start with an instruction that can move", name)
		}
		// The new first instruction takes the function's symbol and
		// debug information; r0 is written before it is read.
		nop := asm.Mov.Imm(asm.R0, 0).WithMetadata(insns[0].Metadata)
		first := insns[0].WithMetadata(asm.Metadata{})
		other.Programs[name].Instructions = append(asm.Instructions{nop, first}, insns[1:]...)
	}
	return loadSpec(other, reuse)
}
