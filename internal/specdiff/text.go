package specdiff

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// Unset is how a diff prints a field that has no value on one side.
const Unset = "(unset)"

// WriteText prints the diff for people, a line per object as in
// `terraform plan`:
//
//   - vm web3 (host esx1, cpus 1)
//     ~ portgroup pg-web: shaping.egress.average 100Mbit -> 200Mbit
//   - network blue (vni 4242, subnet 10.1.0.0/24)
//
// an added object with the fields it sets, a removed one with those it
// set, a changed one with each field that differs (on lines of their own
// when there are several). An equal diff prints nothing.
func (d *Diff) WriteText(w io.Writer) error {
	var b bytes.Buffer
	for i := range d.Changes {
		writeChange(&b, &d.Changes[i])
	}
	_, err := w.Write(b.Bytes())
	return err
}

// String is WriteText's text.
func (d *Diff) String() string {
	var b strings.Builder
	_ = d.WriteText(&b) // a builder does not fail
	return b.String()
}

func writeChange(b *bytes.Buffer, c *Change) {
	fmt.Fprintf(b, "%s %s", c.Op.Sign(), c.Ref())
	switch {
	case c.Op != Changed:
		if len(c.Fields) > 0 {
			parts := make([]string, len(c.Fields))
			for i, f := range c.Fields {
				parts[i] = f.Path + " " + shown(f.From+f.To) // one of the two is empty
			}
			fmt.Fprintf(b, " (%s)", strings.Join(parts, ", "))
		}
	case len(c.Fields) == 1:
		fmt.Fprintf(b, ": %s", fieldChange(c.Fields[0]))
	default:
		b.WriteString(":")
		for _, f := range c.Fields {
			fmt.Fprintf(b, "\n    %s", fieldChange(f))
		}
	}
	b.WriteByte('\n')
}

func fieldChange(f Field) string { return f.Path + " " + shown(f.From) + " -> " + shown(f.To) }

func shown(v string) string {
	if v == "" {
		return Unset
	}
	return v
}

// nouns name the kinds in a summary, singular and plural.
var nouns = map[Kind][2]string{
	KindInfrastructure: {"infrastructure", "infrastructures"},
	KindHost:           {"host", "hosts"},
	KindNIC:            {"NIC", "NICs"},
	KindHostPort:       {"host port", "host ports"},
	KindSwitch:         {"switch", "switches"},
	KindUplink:         {"uplink", "uplinks"},
	KindPool:           {"pool", "pools"},
	KindPortGroup:      {"port group", "port groups"},
	KindClassifyRule:   {"classify rule", "classify rules"},
	KindACLRule:        {"ACL rule", "ACL rules"},
	KindNetwork:        {"network", "networks"},
	KindRouter:         {"router", "routers"},
	KindVM:             {"VM", "VMs"},
	KindVNIC:           {"vNIC", "vNICs"},
}

// maxTopics is how many of a kind's changed fields a summary names.
const maxTopics = 3

// Summary says in one line what the diff changes, for a history entry:
// "+2 VMs, ~1 port group (shaping), -1 network". It counts objects by
// kind, additions first, then changes (naming the top-level fields that
// changed), then removals; what comes or goes with the object it belongs
// to (a VM's vNICs) is not counted. An equal diff is "no change".
func (d *Diff) Summary() string {
	type group struct {
		n      int
		topics []string
	}
	groups := map[Op]map[Kind]*group{}
	for _, c := range d.Changes {
		if c.Implied {
			continue
		}
		if groups[c.Op] == nil {
			groups[c.Op] = map[Kind]*group{}
		}
		g := groups[c.Op][c.Kind]
		if g == nil {
			g = &group{}
			groups[c.Op][c.Kind] = g
		}
		g.n++
		if c.Op == Changed {
			for _, f := range c.Fields {
				g.topics = appendNew(g.topics, topic(f.Path))
			}
		}
	}
	var parts []string
	for _, op := range []Op{Added, Changed, Removed} {
		for _, k := range Kinds {
			g := groups[op][k]
			if g == nil {
				continue
			}
			noun := nouns[k][0]
			if g.n != 1 {
				noun = nouns[k][1]
			}
			part := fmt.Sprintf("%s%d %s", op.Sign(), g.n, noun)
			if len(g.topics) > 0 {
				topics := g.topics
				if len(topics) > maxTopics {
					topics = append(topics[:maxTopics:maxTopics], "…")
				}
				part += " (" + strings.Join(topics, ", ") + ")"
			}
			parts = append(parts, part)
		}
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, ", ")
}

// topic is a field path's first key: shaping for shaping.egress.average.
func topic(path string) string {
	if i := strings.IndexAny(path, ".["); i > 0 {
		return path[:i]
	}
	return path
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
