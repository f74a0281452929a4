package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/vnet-project/vnet/internal/teaming"
)

// Steer is what a steering program does. When a host's switch has several
// uplinks, the bridge no longer decides which uplink a frame leaves by: a
// program on each port sends frames for the outside straight to the port's
// uplink, and a program on each uplink drops what the switch must not take
// in from it. Together they keep the team loop-free and without duplicates.
type Steer struct {
	// Out: the program sits on a port (frames from the VM or host port);
	// otherwise on an uplink (frames from the physical switch).
	Out bool
	// To are the NICs a port's outbound frames leave by: one when pinned,
	// several when spread per flow by IP hash, none when no uplink is up.
	To []string
	// Bcast: the uplink takes broadcast, multicast and unknown unicast for
	// the whole switch. One uplink per host and switch does.
	Bcast bool
	// Accept are the local MACs whose unicast the uplink takes.
	Accept []string
	// Local are the MACs of every port of the switch on this host. A port
	// sends frames for them through the bridge; an uplink drops frames
	// from them, which can only be its own broadcasts coming back.
	Local []string
}

// String is the canonical text of a program; its digest is kept in the tc
// filter's name, so that observation knows exactly what was realized.
func (s Steer) String() string {
	var b strings.Builder
	if s.Out {
		b.WriteString("out to=" + list(s.To))
	} else {
		b.WriteString("in bcast=" + map[bool]string{true: "yes", false: "no"}[s.Bcast])
		b.WriteString(" accept=" + list(s.Accept))
	}
	b.WriteString(" local=" + list(s.Local))
	return b.String()
}

func list(xs []string) string {
	if len(xs) == 0 {
		return "-"
	}
	return strings.Join(xs, ",")
}

// ParseSteer reads the canonical text back.
func ParseSteer(text string) (Steer, error) {
	var s Steer
	fields := strings.Fields(text)
	if len(fields) == 0 || (fields[0] != "out" && fields[0] != "in") {
		return s, fmt.Errorf("steering %q: want out|in first", text)
	}
	s.Out = fields[0] == "out"
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return s, fmt.Errorf("steering %q: field %q has no value", text, f)
		}
		var items []string
		if v != "-" {
			items = strings.Split(v, ",")
		}
		switch k {
		case "to":
			s.To = items
		case "bcast":
			s.Bcast = v == "yes"
		case "accept":
			s.Accept = items
		case "local":
			s.Local = items
		default:
			return s, fmt.Errorf("steering %q: unknown field %q", text, k)
		}
	}
	return s, nil
}

// whyText records a port's assignment on its steering resource: the uplink,
// the reason and since when, so that the next apply, the agent and status
// all read it back from the kernel.
func whyText(a teaming.Assignment) string {
	s := a.Uplink + ": " + string(a.Reason)
	if !a.Since.IsZero() {
		s += " @" + a.Since.UTC().Format(time.RFC3339)
	}
	return s
}

func parseWhy(s string) (teaming.Assignment, bool) {
	uplink, rest, ok := strings.Cut(s, ": ")
	if !ok {
		return teaming.Assignment{}, false
	}
	a := teaming.Assignment{Uplink: uplink, Reason: teaming.Reason(rest)}
	if reason, at, ok := strings.Cut(rest, " @"); ok {
		a.Reason = teaming.Reason(reason)
		a.Since, _ = time.Parse(time.RFC3339, at)
	}
	return a, true
}

// Assignments reads every port's current uplink from steering resources, as
// observed: the "previous" assignment that teaming decisions build on.
func Assignments(rs []Resource) map[string]teaming.Assignment {
	out := map[string]teaming.Assignment{}
	for _, r := range rs {
		if r.Kind != KindSteer || r.Name == "" {
			continue
		}
		if a, ok := parseWhy(r.Why); ok {
			out[r.Name] = a
		}
	}
	return out
}

// A steering program's text grows with the ports on its switch, and tc
// keeps at most 256 bytes of a cls_bpf filter's name. So the kernel holds a
// digest of the text, and observation reports the digest; ResolveSteer
// puts the text back from a model that produced it.

// SteerDigest is the form of a steering text the kernel holds.
func SteerDigest(text string) string {
	sum := sha256.Sum256([]byte(text))
	return digestPrefix + hex.EncodeToString(sum[:12])
}

const digestPrefix = "sha256:"

// digested reports whether the kernel holds a kind's text as a digest:
// steering programs, port policies (nftables keeps at most 256 bytes of
// a rule's user data; a tc filter's name holds a port program's) and load
// balancers (whose text grows with their backends, like a steering
// program's).
func digested(k Kind) bool {
	return k == KindSteer || k == KindPortSec || k == KindPortBPF || k == KindLB
}

// IsDigest reports whether a steering resource's Match is a digest that no
// model resolved: its program cannot be made again from it.
func IsDigest(match string) bool { return strings.Contains(match, digestPrefix) }

// ResolveSteer returns observed with each steering digest replaced by the
// text of the first model resource with the same key whose text has that
// digest. A digest no model explains stays as it is.
func ResolveSteer(observed []Resource, models ...[]Resource) []Resource {
	texts := map[string]string{} // key + digest -> text
	for _, m := range models {
		for _, r := range m {
			if digested(r.Kind) && !IsDigest(r.Match) {
				k := r.Key() + " " + SteerDigest(r.Match)
				if _, ok := texts[k]; !ok {
					texts[k] = r.Match
				}
			}
		}
	}
	out := make([]Resource, len(observed))
	copy(out, observed)
	for i := range out {
		if r := &out[i]; digested(r.Kind) && strings.HasPrefix(r.Match, digestPrefix) {
			if text, ok := texts[r.Key()+" "+r.Match]; ok {
				r.Match = text
			}
		}
	}
	return out
}
