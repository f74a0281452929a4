// Package teaming decides which uplink of a team carries each port's
// traffic: the policies of S3/S4 (originating port, source MAC, IP hash,
// explicit failover order, load-based), failover to the remaining active
// uplinks and then the standbys, failback, and load-based teaming's
// rebalancing. It is pure: the dataplane applies its decisions and feeds
// it link states and rates.
package teaming

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/vnet-project/vnet/internal/quote"
)

// Policy is how a team spreads ports over its active uplinks.
type Policy string

// The policies.
const (
	PortID    Policy = "portid"    // each port pinned to one active uplink, stable across restarts
	SrcMAC    Policy = "srcmac"    // by a hash of the port's MAC
	IPHash    Policy = "iphash"    // per flow, by a hash of source and destination IP
	Failover  Policy = "failover"  // the first active uplink that is up carries everything
	LoadBased Policy = "loadbased" // starts as PortID; LBT moves ports off busy uplinks
)

// ParsePolicy reads a policy name.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PortID, SrcMAC, IPHash, Failover, LoadBased:
		return p, nil
	case "":
		return PortID, nil
	}
	return "", fmt.Errorf("teaming policy %s: want loadbased, portid, srcmac, iphash or failover", quote.Q(s))
}

// Team is a port group's teaming policy.
type Team struct {
	Policy   Policy
	Active   []string // in order
	Standby  []string // in order; used only when no active uplink is up
	Failback bool     // return to the policy's uplink when it comes back
	LBT      LBTConfig
}

// Port is a switch port whose traffic the team carries.
type Port struct {
	ID  string // stable: "vm/eth0", "host/vmk0"
	MAC string
}

// Reason says why a port is on its uplink.
type Reason string

// The reasons.
const (
	Pinned   Reason = "pinned"   // portid
	Hashed   Reason = "hashed"   // srcmac
	PerFlow  Reason = "per flow" // iphash: the port's flows spread, this is its default
	Ordered  Reason = "failover order"
	Moved    Reason = "moved by LBT"
	FailedTo Reason = "failover" // its uplink is down
	Stayed   Reason = "no failback"
	NoUplink Reason = "no uplink up"
)

// Assignment is where a port's traffic goes, and why.
type Assignment struct {
	Uplink string    `json:"uplink"`
	Reason Reason    `json:"reason"`
	Since  time.Time `json:"since"`
}

// Assign places every port. up says which uplinks are up; prev is the last
// assignment (nil at start), which LBT moves and failback decisions build on.
func Assign(t Team, up map[string]bool, ports []Port, prev map[string]Assignment, now time.Time) map[string]Assignment {
	out := make(map[string]Assignment, len(ports))
	for _, p := range ports {
		out[p.ID] = assignOne(t, up, p, prev[p.ID], now)
	}
	return out
}

func assignOne(t Team, up map[string]bool, p Port, prev Assignment, now time.Time) Assignment {
	keep := func(a Assignment) Assignment {
		if prev.Uplink == a.Uplink && prev.Reason == a.Reason {
			return prev // unchanged: keep its time
		}
		a.Since = now
		return a
	}
	// The uplink the policy wants, were all active uplinks up.
	preferred, reason := policyChoice(t, p, t.Active)
	// An LBT move stands while its uplink is up.
	if t.Policy == LoadBased && prev.Reason == Moved && up[prev.Uplink] && contains(t.Active, prev.Uplink) {
		return prev
	}
	if up[preferred] {
		if !t.Failback && prev.Uplink != "" && prev.Uplink != preferred && up[prev.Uplink] && (prev.Reason == FailedTo || prev.Reason == Stayed) {
			return keep(Assignment{Uplink: prev.Uplink, Reason: Stayed})
		}
		return keep(Assignment{Uplink: preferred, Reason: reason})
	}
	// Failover: the policy over the active uplinks still up, then standbys in order.
	if live := filterUp(t.Active, up); len(live) > 0 {
		u, _ := policyChoice(t, p, live)
		return keep(Assignment{Uplink: u, Reason: FailedTo})
	}
	for _, s := range t.Standby {
		if up[s] {
			return keep(Assignment{Uplink: s, Reason: FailedTo})
		}
	}
	return keep(Assignment{Reason: NoUplink})
}

// policyChoice applies the policy over a set of candidate uplinks.
func policyChoice(t Team, p Port, candidates []string) (string, Reason) {
	if len(candidates) == 0 {
		return "", NoUplink
	}
	switch t.Policy {
	case Failover:
		return candidates[0], Ordered
	case SrcMAC:
		return highestRandomWeight(p.MAC, candidates), Hashed
	case IPHash:
		return highestRandomWeight(p.ID, candidates), PerFlow
	default: // PortID, LoadBased
		return highestRandomWeight(p.ID, candidates), Pinned
	}
}

// FlowUplink is where an iphash team sends one flow.
func FlowUplink(t Team, up map[string]bool, srcIP, dstIP string) string {
	live := filterUp(t.Active, up)
	if len(live) == 0 {
		live = filterUp(t.Standby, up)
		if len(live) == 0 {
			return ""
		}
		return live[0]
	}
	return highestRandomWeight(srcIP+">"+dstIP, live)
}

// highestRandomWeight (rendezvous hashing) picks the candidate with the
// highest hash of (key, candidate). A key keeps its uplink as long as that
// uplink is a candidate, and losing an uplink moves only its own keys.
func highestRandomWeight(key string, candidates []string) string {
	best, bestW := "", uint64(0)
	for _, c := range candidates {
		sum := sha256.Sum256([]byte(key + "\x00" + c))
		if w := binary.BigEndian.Uint64(sum[:8]); best == "" || w > bestW {
			best, bestW = c, w
		}
	}
	return best
}

func filterUp(list []string, up map[string]bool) []string {
	var out []string
	for _, u := range list {
		if up[u] {
			out = append(out, u)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
