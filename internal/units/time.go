package units

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Percent is a fraction of something, written "75%" (or 75) and kept as 0.75.
type Percent float64

// ParsePercent reads "75%", "75" or "12.5%". The value must lie in (0, 100].
func ParsePercent(s string) (Percent, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%")), 64)
	if err != nil || !(v > 0 && v <= 100) { // NaN fails both
		return 0, fmt.Errorf("percentage %s: want a number above 0 and at most 100, e.g. 75%%", quote(s))
	}
	return Percent(v / 100), nil
}

func (p Percent) String() string { return strconv.FormatFloat(float64(p)*100, 'f', -1, 64) + "%" }

// UnmarshalText lets YAML carry percentages as text.
func (p *Percent) UnmarshalText(b []byte) error {
	v, err := ParsePercent(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// MarshalText is the inverse of UnmarshalText.
func (p Percent) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Duration is a span of time written as Go and systemd users do: "30s", "500ms", "2m".
type Duration time.Duration

// ParseDuration reads a positive duration with a unit.
func ParseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("duration %s: want a positive time with a unit, e.g. 30s or 500ms", quote(s))
	}
	return Duration(d), nil
}

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalText lets YAML carry durations as text.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalText is the inverse of UnmarshalText.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }
