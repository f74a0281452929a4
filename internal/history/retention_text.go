package history

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// A retention is written as people write it, in JSON and YAML alike:
// {"max_entries": 50, "max_age": "30d"}, either left out for its default.
type retentionText struct {
	MaxEntries int    `json:"max_entries,omitempty" yaml:"max_entries,omitempty"`
	MaxAge     string `json:"max_age,omitempty" yaml:"max_age,omitempty"`
}

func (r Retention) text() retentionText {
	t := retentionText{MaxEntries: r.MaxEntries}
	if r.MaxAge > 0 {
		t.MaxAge = FormatAge(r.MaxAge)
	}
	return t
}

func (t retentionText) retention() (Retention, error) {
	r := Retention{MaxEntries: t.MaxEntries}
	if t.MaxAge != "" && t.MaxAge != AnyAge {
		age, err := ParseAge(t.MaxAge)
		if err != nil {
			return r, err
		}
		r.MaxAge = age
	}
	return r, r.Validate()
}

// FormatAge writes an age as ParseAge reads it: whole days as "30d",
// anything else as a Go duration.
func FormatAge(d time.Duration) string {
	const day = 24 * time.Hour
	if d > 0 && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	return d.String()
}

// MarshalJSON writes the retention with its age as text.
func (r Retention) MarshalJSON() ([]byte, error) { return json.Marshal(r.text()) }

// UnmarshalJSON reads what MarshalJSON writes, and refuses a retention
// Validate refuses.
func (r *Retention) UnmarshalJSON(b []byte) error {
	var t retentionText
	if err := json.Unmarshal(b, &t); err != nil {
		return fmt.Errorf("history retention: %w", err)
	}
	v, err := t.retention()
	*r = v
	return err
}

// MarshalYAML writes the retention with its age as text.
func (r Retention) MarshalYAML() (any, error) { return r.text(), nil }

// UnmarshalYAML reads what MarshalYAML writes.
func (r *Retention) UnmarshalYAML(n *yaml.Node) error {
	var t retentionText
	if err := n.Decode(&t); err != nil {
		return fmt.Errorf("history retention: %w", err)
	}
	v, err := t.retention()
	*r = v
	return err
}

// AnyAge is how the effective form writes a retention that keeps entries
// of any age, and what --max-age and the stored form read as no limit.
const AnyAge = "any"

// Effective is a retention as it acts, for people and scripts: the count
// it keeps (DefaultMaxEntries when it says none) and its age, AnyAge when
// it has none. The stored form leaves defaults out (zero); this one
// writes what they are, as String does.
type Effective struct {
	MaxEntries int    `json:"max_entries" yaml:"max_entries"`
	MaxAge     string `json:"max_age" yaml:"max_age"`
}

// Effective is what the retention keeps, written out.
func (r Retention) Effective() Effective {
	e := Effective{MaxEntries: r.maxEntries(), MaxAge: AnyAge}
	if r.MaxAge > 0 {
		e.MaxAge = FormatAge(r.MaxAge)
	}
	return e
}

// String says what the retention keeps.
func (r Retention) String() string { return r.Effective().String() }

// String says what the retention keeps, as Retention.String does.
func (e Effective) String() string {
	s := fmt.Sprintf("the newest %d entries", e.MaxEntries)
	if e.MaxAge != AnyAge {
		s += " of at most " + e.MaxAge
	}
	return s + " (and the entry of the generation in force)"
}
