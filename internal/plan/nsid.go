package plan

// NamespaceIDs is what an apply's record keeps of the identity of the
// namespaces it names, so that the next apply can tell each is still the
// one this store made without entering it to read its mark. The kernel
// gives every namespace a 64-bit ID that it never gives another during
// the same boot (unlike a namespace's inode number, which it reuses), so
// an ID of the same boot, noted when the namespace carried Mark, stands
// for that namespace and no other.
type NamespaceIDs struct {
	Boot string            `json:"boot"` // the boot's random ID (/proc/sys/kernel/random/boot_id)
	Mark string            `json:"mark"` // the mark each namespace carried when its ID was noted
	IDs  map[string]uint64 `json:"ids"`  // by namespace name
}

// Vouch splits names into the namespaces ids vouches for, with their IDs,
// and those it cannot (the rest, in order), whose marks must be read.
// It vouches for none when ids is nil (a record made before IDs were
// kept, or on a kernel that has none), of another boot, or noted with
// another mark than want (the infrastructure, store or directory
// differs); otherwise for each whose current ID is the one noted. current
// reads the current IDs (missing: the namespace is gone or the kernel
// tells none); it is not called when ids can vouch for none.
func (ids *NamespaceIDs) Vouch(boot, want string, names []string, current func([]string) map[string]uint64) (same map[string]uint64, unknown []string) {
	if ids == nil || boot == "" || ids.Boot != boot || ids.Mark != want {
		return nil, names
	}
	now := current(names)
	same = make(map[string]uint64, len(names))
	for _, name := range names {
		id, noted := ids.IDs[name]
		if cur, ok := now[name]; noted && ok && id != 0 && cur == id {
			same[name] = id
			continue
		}
		unknown = append(unknown, name)
	}
	return same, unknown
}
