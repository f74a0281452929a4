// Package ioc is Network I/O Control's arithmetic: how resource pools'
// shares, limits and reservations become HTB classes on an uplink, whether
// a set of reservations may be admitted, and how port groups and rules
// become u32 matches. It knows nothing of netlink; plan turns its answers
// into resources.
//
// The model on each uplink (egress, where contention happens):
//
//	1:1  the wire (line rate)
//	├── 1:10   unclassified traffic, normal shares
//	└── 1:1xx  one class per pool: rate = reservation + (line - Σreservations) × shares/Σshares,
//	           ceil = min(line, limit), quantum ∝ shares
//
// HTB guarantees each class its rate and lends what idle classes leave in
// proportion to quantum. Because both rate and quantum are proportional to
// shares (above reservations), the pools that have traffic divide the
// uplink in proportion to their shares whichever others are idle, and a
// lone pool may use the whole line: shares matter only under contention.
// Each class has its own queue, so one pool's backlog never drops another's
// packets.
package ioc

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/vnet-project/vnet/internal/quote"
)

// Share presets, as in vSphere.
const (
	Low    = 25
	Normal = 50
	High   = 100
)

// SystemPools always exist when IOC is on, with normal shares and no limit.
var SystemPools = []string{"management", "vmotion", "ft", "iscsi", "nfs", "vm"}

// IsSystemPool reports whether name is one of SystemPools.
func IsSystemPool(name string) bool {
	for _, p := range SystemPools {
		if p == name {
			return true
		}
	}
	return false
}

// ParseShares reads low, normal, high or a number from 1 to 100.
func ParseShares(s string) (int, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "low":
		return Low, nil
	case "normal", "":
		return Normal, nil
	case "high":
		return High, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > 100 {
		return 0, fmt.Errorf("shares %s: want low (25), normal (50), high (100) or 1..100", quote.Q(s))
	}
	return n, nil
}

// Pool is a resource pool's policy. Rates are bit/s; 0 means none.
type Pool struct {
	Name        string
	Shares      int
	Limit       uint64
	Reservation uint64
}

// Class is a pool's HTB class on one uplink.
type Class struct {
	Pool    string
	Minor   uint32 // class 1:Minor
	Rate    uint64 // bit/s, assured
	Ceil    uint64 // bit/s, at most
	Quantum uint32 // bytes lent per round when borrowing
}

// UnclassifiedMinor is the default leaf: traffic that no port group or rule
// claims (ARP, unknown sources) competes there with normal shares.
const UnclassifiedMinor = 0x10

// Unclassified names that class in stats.
const Unclassified = "(unclassified)"

// largestFrame is the most one dequeue takes from a class: a 64 KiB GSO
// frame as HTB counts it, with every segment's headers (about 68.5 KB).
const largestFrame = 70000

// quantumPerShare is what each share lends per round on an uplink whose
// smallest pool has minShares: enough that the smallest lends a whole
// largest frame. HTB hands a borrowing class one frame a turn whatever its
// quantum, so a quantum under a frame overpays that class. With a fixed
// 2000 per share a 25-share pool lent 50000 bytes a round but sent a 64 KiB
// frame every turn, and took 22.7% of the line beside a 100-share pool
// instead of 20%.
func quantumPerShare(minShares int) uint32 {
	return uint32((largestFrame + minShares - 1) / minShares)
}

// Pools returns the system pools with the given overrides and the user
// pools, in a stable order: system pools first, then user pools by name.
func Pools(overrides map[string]Pool) []Pool {
	var out []Pool
	for _, name := range SystemPools {
		p, ok := overrides[name]
		if !ok {
			p = Pool{Shares: Normal}
		}
		p.Name = name
		out = append(out, p)
	}
	var users []string
	for name := range overrides {
		if !IsSystemPool(name) {
			users = append(users, name)
		}
	}
	sort.Strings(users)
	for _, name := range users {
		p := overrides[name]
		p.Name = name
		out = append(out, p)
	}
	return out
}

// Minor is a pool's class number: system pools keep theirs, user pools
// follow in name order.
func Minor(index int) uint32 { return 0x101 + uint32(index) }

// Classes computes every pool's class on an uplink of the given line rate,
// plus the unclassified class (minor UnclassifiedMinor, first).
func Classes(line uint64, pools []Pool) []Class {
	var shares, reserved uint64 = Normal, 0 // the unclassified class takes part with normal shares
	minShares := Normal
	for _, p := range pools {
		shares += uint64(p.Shares)
		reserved += p.Reservation
		minShares = min(minShares, p.Shares)
	}
	perShare := quantumPerShare(max(minShares, 1))
	spare := uint64(0)
	if reserved < line {
		spare = line - reserved
	}
	class := func(name string, minor uint32, s int, res, limit uint64) Class {
		rate := res + spare*uint64(s)/shares
		ceil := line
		if limit > 0 && limit < line {
			ceil = limit
		}
		rate = min(max(rate, 8), ceil)
		return Class{Pool: name, Minor: minor, Rate: rate / 8 * 8, Ceil: ceil / 8 * 8, Quantum: uint32(s) * perShare}
	}
	out := []Class{class(Unclassified, UnclassifiedMinor, Normal, 0, 0)}
	for i, p := range pools {
		out = append(out, class(p.Name, Minor(i), p.Shares, p.Reservation, p.Limit))
	}
	return out
}

// MaxReservedFraction is how much of the slowest uplink reservations may take.
const MaxReservedFraction = 0.75

// Admit checks that the reservations fit on the slowest uplink of the
// switch, leaving a quarter for everything unreserved.
func Admit(pools []Pool, slowest uint64) error {
	var sum uint64
	for _, p := range pools {
		sum += p.Reservation
	}
	if allowed := uint64(float64(slowest) * MaxReservedFraction); sum > allowed {
		return fmt.Errorf("reservations add up to %s, more than %.0f%% of the slowest uplink (%s): at most %s",
			bits(sum), MaxReservedFraction*100, bits(slowest), bits(allowed))
	}
	return nil
}

func bits(v uint64) string {
	switch {
	case v >= 1e9 && v%1e7 == 0:
		return strconv.FormatFloat(float64(v)/1e9, 'f', -1, 64) + "Gbit"
	case v >= 1e6:
		return strconv.FormatFloat(float64(v)/1e6, 'f', -1, 64) + "Mbit"
	}
	return strconv.FormatUint(v, 10) + "bit"
}
