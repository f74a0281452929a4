package service

import (
	"context"
	"errors"
	"os"
)

// DefaultStateDir is the state directory a runtime's face uses when it is
// given none and VNET_STATE_DIR is not set.
const DefaultStateDir = "/var/lib/vnet"

// AttachSite is where a runtime's face (the CNI plugin, the libvirt hook)
// finds the infrastructure its attachments go to: this machine's state
// directory, or a cluster's etcd, whose host agents realize them.
type AttachSite struct {
	// StateDir is this machine's state directory ("": VNET_STATE_DIR,
	// else DefaultStateDir); over etcd, where decoded specs are cached.
	StateDir string
	// Etcd, when set, is the cluster's etcd: an attachment is stored as
	// the next generation of the spec and returns once the host's agent
	// realized it (Cluster.Attach).
	Etcd []string
	TLS  TLSFiles
}

// AttachBackend is what a runtime's face asks of the service: the
// attachments, and whether the infrastructure is there.
type AttachBackend interface {
	Attacher
	Get(ctx context.Context, name string) (*Infra, error)
	Close() error
}

// OpenAttachSite is the back end of the site: a Cluster over its etcd, or
// this machine's Local. Neither connects nor opens a store until asked.
func OpenAttachSite(s AttachSite) AttachBackend {
	dir := s.StateDir
	if dir == "" {
		dir = os.Getenv("VNET_STATE_DIR")
	}
	if dir == "" {
		dir = DefaultStateDir
	}
	if len(s.Etcd) > 0 {
		return OpenCluster(s.Etcd, s.TLS, SpecCache(dir))
	}
	exe, err := os.Executable()
	if err != nil {
		exe = "" // a change then starts no teaming agent
	}
	l := NewLocal(dir, exe)
	if os.Getenv("VNET_TRACE") != "" {
		l.Trace = os.Stderr // where a change's time goes, as the CLI's VNET_TRACE
	}
	return l
}

// ErrNoServer: the vnet server a runtime's face was told to go through
// cannot be reached. The face does not fall back to this machine's store:
// the server writes it, and two writers of one store would be wrong.
var ErrNoServer = errors.New("cannot be reached (is vnet server running?)")
