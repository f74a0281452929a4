package dataplane

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/dataplane/bpfpolicy"
	"github.com/vnet-project/vnet/internal/killpoint"
)

// A namespace's ports keep the programs they run across vnet's upgrades
// unless something switches them: a newer build of vnet that finds the
// programs of another (with maps it can share) loads its own on those
// maps and re-points every port's filters to them, once, on its first
// use of the namespace's programs (upgradePortPrograms). That costs a
// look at every program of the machine and at every port's filters, once
// per upgrade; a namespace that runs this build's programs costs the look
// at the programs only, and never a walk of its ports. Ports on either
// pair enforce the same policy meanwhile (the maps are the same), so a
// command killed halfway leaves the namespace safe, and the next one
// finds the pair still sharing the maps and finishes.

// buildTags are the kernel's tags of this build's programs (what code
// they run). The kernel computes them from the instructions vnet hands
// it, after the loader's linking and relocation, so they are read from
// programs loaded once and noted with the note of the kernel's support
// (kernelcache.go): a command does not load programs to learn them.
var buildTags = sync.OnceValues(func() (string, error) {
	key, keyErr := portProgKey()
	if keyErr == nil {
		if note, ok := strings.CutPrefix(readNote(portProgTagsNote), key+"\n"); ok && note != "" {
			return note, nil
		}
	}
	p, err := bpfpolicy.Load(nil)
	if err != nil {
		return "", err
	}
	defer p.Close()
	tags, err := tagsOf(p)
	if err != nil {
		return "", err
	}
	if keyErr == nil {
		writeNote(portProgTagsNote, key+"\n"+tags)
	}
	return tags, nil
})

const portProgTagsNote = "port-program-tags"

func tagsOf(p *bpfpolicy.Programs) (string, error) {
	from, to, err := p.Tags()
	return from + " " + to, err
}

// upgradePortPrograms returns the programs the namespace's ports are to
// run, given those found there (p): p when it is this build's code and
// no other programs share its maps, else this build's on p's maps
// (closing p), to which every port that runs programs on those maps has
// been re-pointed. Programs whose maps this build cannot share stay as
// they are: their ports' policies could not be handed on.
func upgradePortPrograms(ns string, h *netlink.Handle, p *bpfpolicy.Programs) (*bpfpolicy.Programs, error) {
	want, err := buildTags()
	if err != nil {
		return p, nil // this build's code unknown: the programs found serve
	}
	have, err := tagsOf(p)
	if err != nil {
		return nil, err
	}
	others, err := p.Sharers()
	if err != nil {
		return nil, fmt.Errorf("port programs of %s: %w", ns, err)
	}
	if have == want && len(others) == 0 {
		return p, nil
	}
	if have != want {
		next, err := p.Successor()
		if errors.Is(err, bpfpolicy.ErrIncompatible) {
			return p, nil
		}
		if err != nil {
			return nil, fmt.Errorf("port programs of %s: %w", ns, bpfErr(err))
		}
		from, to := p.IDs()
		others = append(others, from, to)
		p.Close()
		p = next
	}
	if err := repointPorts(h, ns, p, others); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// repointPorts replaces, in every port's hooks, the filters that run one
// of old by the same filter running p's program of that hook: in place,
// one hook at a time, as an apply replaces a port's filters, so no frame
// passes a hook without a program.
func repointPorts(h *netlink.Handle, ns string, p *bpfpolicy.Programs, old []ebpf.ProgramID) error {
	hooked, err := hookedLinks(h)
	if err != nil {
		return err
	}
	for _, index := range hooked {
		link := linkAt(index)
		for parent, prog := range map[uint32]*ebpf.Program{netlink.HANDLE_MIN_INGRESS: p.FromVM, netlink.HANDLE_MIN_EGRESS: p.ToVM} {
			f := portFilterOn(h, link, parent)
			if f == nil || f.Priority != portProgPrio(parent) || !slices.Contains(old, ebpf.ProgramID(f.Id)) {
				continue
			}
			if err := replacePortFilter(h, link, parent, prog, f.Name); err != nil {
				return fmt.Errorf("put this build's port programs on link %d in %s: %w", index, ns, err)
			}
			killpoint.At("port program re-pointed: " + ns)
		}
	}
	changed("port programs of %s replaced by this build's", ns)
	return nil
}
