package etcdstore

import "sort"

// HostState is one host's standing against the applied generation.
type HostState string

const (
	// HostCurrent realized the applied generation without errors.
	HostCurrent HostState = "current"
	// HostLagging reports a generation other than the applied one: its
	// agent has not caught up yet (or is stuck on an older spec).
	HostLagging HostState = "lagging"
	// HostFailed tried the applied generation and reported errors, or
	// failed to remove its part of an infrastructure that no longer
	// places anything on it (Report.Removing).
	HostFailed HostState = "failed"
	// HostGone is named by the spec but has no report: its agent is not
	// running, or has not been heard from for longer than the report TTL.
	HostGone HostState = "gone"
	// HostUnexpected reports for an infrastructure whose spec does not name
	// it (a host removed from the spec whose agent still runs), or whose
	// record is gone, and has not failed to remove its part.
	HostUnexpected HostState = "unexpected"
)

// HostView is one host's verdict and the report it rests on (nil if gone).
type HostView struct {
	Host   string    `json:"host"`
	State  HostState `json:"state"`
	Report *Report   `json:"report,omitempty"`
}

// Assess gives each host a state: the hosts the spec names (expected) in
// their order, then hosts that report without being named, by name. A
// host that reports a failed removal is failed, named or not. For an
// infrastructure whose record is gone, applied is 0 and expected nil.
func Assess(applied int, expected []string, reports []Report) []HostView {
	byHost := make(map[string]Report, len(reports))
	for _, r := range reports {
		byHost[r.Host] = r
	}
	out := make([]HostView, 0, len(expected)+len(reports))
	named := make(map[string]bool, len(expected))
	for _, h := range expected {
		if named[h] {
			continue
		}
		named[h] = true
		r, ok := byHost[h]
		if !ok {
			out = append(out, HostView{Host: h, State: HostGone})
			continue
		}
		out = append(out, HostView{Host: h, State: judge(applied, r), Report: &r})
	}
	var extra []HostView
	for _, r := range reports {
		if named[r.Host] {
			continue
		}
		state := HostUnexpected
		if removalFailed(r) {
			state = HostFailed
		}
		extra = append(extra, HostView{Host: r.Host, State: state, Report: &r})
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i].Host < extra[j].Host })
	return append(out, extra...)
}

func judge(applied int, r Report) HostState {
	switch {
	case removalFailed(r):
		return HostFailed
	case r.Generation != applied || r.Removing:
		return HostLagging
	case len(r.Errors) > 0:
		return HostFailed
	default:
		return HostCurrent
	}
}

// Converged says whether every host is current.
func Converged(views []HostView) bool {
	for _, v := range views {
		if v.State != HostCurrent {
			return false
		}
	}
	return true
}

// removalFailed says whether a report is of a removal that failed.
func removalFailed(r Report) bool { return r.Removing && len(r.Errors) > 0 }
