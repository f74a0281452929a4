// Package units parses and prints the rates and sizes that specs and the
// measuring engine speak in.
//
// Rates are bits per second with decimal prefixes ("500Mbit", "1.5Gbit").
// Sizes are bytes, with decimal (KB, MB, GB) or binary (KiB, MiB, GiB) prefixes.
// The "bps" forms are refused on purpose: tc reads "mbps" as megabytes per
// second, so a spec that says "100Mbps" is ambiguous to the very people who
// will read it.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	q "github.com/vnet-project/vnet/internal/quote"
)

// Rate is a data rate in bits per second.
type Rate uint64

// Size is an amount of data in bytes.
type Size uint64

var ratePrefixes = map[string]float64{
	"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
}

var sizePrefixes = map[string]float64{
	"": 1, "k": 1e3, "m": 1e6, "g": 1e9,
	"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30,
}

// ParseRate reads "1Gbit", "500mbit", "1.5Gbit/s" or a plain number of bit/s.
func ParseRate(s string) (Rate, error) {
	num, unit := splitNumber(s)
	if num == "" {
		return 0, fmt.Errorf("rate %s: want a number with a unit, e.g. 500Mbit or 10Gbit", quote(s))
	}
	u := strings.TrimSuffix(strings.ToLower(unit), "/s")
	if strings.HasSuffix(u, "bps") {
		return 0, fmt.Errorf("rate %s: ambiguous unit %s (tc reads it as bytes per second); write bits, e.g. %s%sbit", quote(s), quote(unit), clip(num), strings.ToUpper(strings.TrimSuffix(u, "bps")))
	}
	if u != "" && !strings.HasSuffix(u, "bit") {
		return 0, fmt.Errorf("rate %s: unknown unit %s (use bit, Kbit, Mbit, Gbit, Tbit)", quote(s), quote(unit))
	}
	mult, ok := ratePrefixes[strings.TrimSuffix(u, "bit")]
	if !ok {
		return 0, fmt.Errorf("rate %s: unknown unit %s (use bit, Kbit, Mbit, Gbit, Tbit)", quote(s), quote(unit))
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("rate %s: not a non-negative number", quote(s))
	}
	bits := v * mult
	if bits > math.MaxUint64/2 {
		return 0, fmt.Errorf("rate %s: too large", quote(s))
	}
	return Rate(math.Round(bits)), nil
}

// ParseSize reads "64KB", "100KiB", "1MiB" or a plain number of bytes.
func ParseSize(s string) (Size, error) {
	num, unit := splitNumber(s)
	if num == "" {
		return 0, fmt.Errorf("size %s: want a number of bytes, e.g. 64KB or 1MiB", quote(s))
	}
	u := strings.ToLower(unit)
	u = strings.TrimSuffix(u, "b")
	if strings.HasSuffix(strings.ToLower(unit), "bit") {
		return 0, fmt.Errorf("size %s: sizes are bytes (KB, KiB, MB, MiB), not bits", quote(s))
	}
	mult, ok := sizePrefixes[u]
	if !ok {
		return 0, fmt.Errorf("size %s: unknown unit %s (use B, KB, KiB, MB, MiB, GB, GiB)", quote(s), quote(unit))
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("size %s: not a non-negative number", quote(s))
	}
	b := v * mult
	if b > math.MaxUint64/2 {
		return 0, fmt.Errorf("size %s: too large", quote(s))
	}
	return Size(math.Round(b)), nil
}

// quote quotes an input for an error message (package quote).
func quote(s string) string { return q.Q(s) }

func clip(s string) string { return q.Clip(s, q.ClipBytes) }

func splitNumber(s string) (num, unit string) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	return s[:i], strings.TrimSpace(s[i:])
}

// String prints a rate the way iproute2 users read it: "1Gbit", "1.5Gbit", "640Kbit".
func (r Rate) String() string {
	v := float64(r)
	for _, p := range []struct {
		div  float64
		name string
	}{{1e12, "Tbit"}, {1e9, "Gbit"}, {1e6, "Mbit"}, {1e3, "Kbit"}} {
		if v >= p.div {
			return strconv.FormatFloat(v/p.div, 'f', -1, 64) + p.name
		}
	}
	return strconv.FormatUint(uint64(r), 10) + "bit"
}

// Bytes is how much the rate carries in d.
func (r Rate) Bytes(d time.Duration) float64 { return float64(r) / 8 * d.Seconds() }

// BytesPerSecond is the rate as the kernel's schedulers want it.
func (r Rate) BytesPerSecond() uint64 { return uint64(r) / 8 }

// String prints a size with binary prefixes when it is a whole multiple of one.
func (s Size) String() string {
	for _, p := range []struct {
		div  uint64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if uint64(s) >= p.div && uint64(s)%p.div == 0 {
			return strconv.FormatUint(uint64(s)/p.div, 10) + p.name
		}
	}
	return strconv.FormatUint(uint64(s), 10) + "B"
}

// UnmarshalText lets YAML and flags carry rates as text.
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// MarshalText is the inverse of UnmarshalText.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText lets YAML and flags carry sizes as text.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalText is the inverse of UnmarshalText.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
