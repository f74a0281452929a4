package dataplane

import (
	"fmt"
	"sort"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/plan"
)

// ensureNetns makes a namespace (createNetns) and marks it as the
// resource's Mark says: the alias of its lo, which lives and dies with the
// namespace, so that whoever meets the namespace can tell who made it.
// Equivalent to: ip netns add NAME; ip -n NAME link set lo alias MARK
func (l *Linux) ensureNetns(r plan.Resource) error {
	if err := createNetns(r.Name, r.Sysctls, r.Mark); err != nil {
		return err
	}
	return l.SetMark(r.Name, r.Mark)
}

// SetMark sets (or, with an empty mark, clears) a namespace's mark.
// Equivalent to: ip -n NS link set lo alias MARK
func (l *Linux) SetMark(ns, mark string) error {
	h, err := l.handle(ns)
	if err != nil {
		return err
	}
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("netns %s: find lo: %w", ns, err)
	}
	if lo.Attrs().Alias != mark {
		if err := h.LinkSetAlias(lo, mark); err != nil {
			return fmt.Errorf("netns %s: mark lo: %w", ns, err)
		}
	}
	l.noteHandleMark(ns, mark)
	return nil
}

// NamedNS is a namespace whose name looks like vnet's, with its mark ("" when
// it has none).
type NamedNS struct {
	Name string
	Mark string
}

// VnetNamespaces lists every namespace whose name starts with vnet's
// prefix, with its mark, by name: what `vnet recover` reports.
// Equivalent to: ip netns list; ip -n NS link show lo
func (l *Linux) VnetNamespaces() ([]NamedNS, error) {
	names, err := listNetns(plan.NSPrefix)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]NamedNS, 0, len(names))
	for _, ns := range names {
		h, err := l.handle(ns)
		if err != nil {
			return nil, err
		}
		lo, err := h.LinkByName("lo")
		if err != nil {
			return nil, fmt.Errorf("netns %s: find lo: %w", ns, err)
		}
		out = append(out, NamedNS{Name: ns, Mark: lo.Attrs().Alias})
	}
	return out, nil
}

// Marks reads the marks of the named namespaces and cgroups, by their
// resources' keys (netns/NAME, cgroup/NAME): what each that exists
// carries ("" for none), and nothing for one that does not exist. An
// apply reads those its record names, to see that the kernel still holds
// them, as this store's, whatever its change touches.
// Equivalent to: ip -n NS link show lo; getfattr -n trusted.vnet.mark DIR
func (l *Linux) Marks(namespaces, cgroups []string) (map[string]string, error) {
	out := make(map[string]string, len(namespaces)+len(cgroups))
	var mu sync.Mutex
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(markReaders, len(namespaces)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ns := range work {
				if mark, id, ok := namespaceMark(ns); ok {
					l.noteMark(ns, id, mark)
					mu.Lock()
					out[plan.Resource{Kind: plan.KindNetns, Name: ns}.Key()] = mark
					mu.Unlock()
				}
			}
		}()
	}
	for _, ns := range namespaces {
		work <- ns
	}
	close(work)
	wg.Wait()
	for _, name := range cgroups {
		if len(l.cgroups().Dirs(name)) > 0 {
			out[plan.Resource{Kind: plan.KindCgroup, Name: name}.Key()] = l.cgroups().Mark(name)
		}
	}
	return out, nil
}

// markReaders is how many namespaces Marks reads at once: entering one
// is mostly the kernel's work, which several threads share.
const markReaders = 4

// namespaceMark is a namespace's mark and ID (0 when the kernel tells
// none), both read through one open file of it, so that they are of the
// same namespace; ok is false when it does not exist (or vanished while
// it was read).
func namespaceMark(ns string) (mark string, id uint64, ok bool) {
	if !netnsExists(ns) {
		return "", 0, false
	}
	f, err := openNS(ns)
	if err != nil {
		return "", 0, false
	}
	defer f.Close()
	if nsIDs() {
		id, _ = nsIDAt(int(f))
	}
	h, err := netlink.NewHandleAt(f, unix.NETLINK_ROUTE) // vnet uses no other family
	if err != nil {
		return "", 0, false
	}
	defer h.Close()
	lo, err := h.LinkByIndex(1) // lo is the first link of every namespace
	if err != nil {
		return "", 0, false
	}
	return lo.Attrs().Alias, id, true
}
