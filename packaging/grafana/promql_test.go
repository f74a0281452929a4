package grafana

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The Go module of Prometheus's own PromQL parser would upgrade a good part
// of vnet's dependencies (gRPC, OpenTelemetry, the Prometheus client) to
// its versions, for a test; this scanner reads what the test needs of a
// query (its metrics, the labels it matches and groups by), and
// TestQueriesParseWithPromtool has Prometheus's parser check the queries
// where promtool is installed.

// selector is a metric a query reads and the labels it matches on it.
type selector struct {
	metric string
	labels []string
}

type scanned struct {
	selectors []selector
	grouping  []string // by, without, on, ignoring, group_left, group_right
}

var (
	groupingWords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	operatorWords = []string{"bool", "offset", "and", "or", "unless", "atan2"}
	// Aggregations may put their grouping between their name and their
	// parenthesis: sum by (host) (...).
	aggregations = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
)

// scanPromQL reads a query's selectors and grouping labels. Grafana's
// variables ($host, ${datasource}) stand for strings or durations.
func scanPromQL(q string) (*scanned, error) {
	s := &scanner{q: q}
	out := &scanned{}
	depth := 0
	for s.space(); s.i < len(q); s.space() {
		c := q[s.i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if _, err := s.str(); err != nil {
				return nil, err
			}
		case c == '{':
			return nil, fmt.Errorf("at %d: a selector without a metric name", s.i)
		case c == '[':
			end := strings.IndexByte(q[s.i:], ']')
			if end < 0 {
				return nil, errors.New("a range without ]")
			}
			s.i += end + 1
		case c == '$':
			s.i++
			if s.i < len(q) && q[s.i] == '{' {
				end := strings.IndexByte(q[s.i:], '}')
				if end < 0 {
					return nil, errors.New("a variable without }")
				}
				s.i += end + 1
			} else {
				s.ident()
			}
		case c >= '0' && c <= '9' || c == '.':
			for s.i < len(q) && (isIdent(q[s.i]) || q[s.i] == '.') {
				s.i++
			}
		case isIdentStart(c):
			if err := s.word(out); err != nil {
				return nil, err
			}
		case c == '(':
			depth++
			s.i++
		case c == ')':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("at %d: ) without (", s.i)
			}
			s.i++
		default:
			s.i++
		}
	}
	if depth != 0 {
		return nil, errors.New("( without )")
	}
	return out, nil
}

type scanner struct {
	q string
	i int
}

func (s *scanner) space() {
	for s.i < len(s.q) && strings.IndexByte(" \t\n", s.q[s.i]) >= 0 {
		s.i++
	}
}

func (s *scanner) peek() byte {
	s.space()
	if s.i < len(s.q) {
		return s.q[s.i]
	}
	return 0
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func (s *scanner) ident() string {
	start := s.i
	for s.i < len(s.q) && isIdent(s.q[s.i]) {
		s.i++
	}
	return s.q[start:s.i]
}

// str skips a string literal.
func (s *scanner) str() (string, error) {
	quote := s.q[s.i]
	for j := s.i + 1; j < len(s.q); j++ {
		switch s.q[j] {
		case '\\':
			if quote != '`' {
				j++
			}
		case quote:
			v := s.q[s.i+1 : j]
			s.i = j + 1
			return v, nil
		}
	}
	return "", fmt.Errorf("at %d: a string without its end", s.i)
}

// word reads a name: a grouping with its labels, an operator, a function
// (followed by a parenthesis) or a metric with its matchers.
func (s *scanner) word(out *scanned) error {
	w := s.ident()
	switch {
	case slices.Contains(groupingWords, w):
		if s.peek() != '(' {
			return nil
		}
		s.i++
		for {
			switch c := s.peek(); {
			case c == ')':
				s.i++
				return nil
			case c == ',':
				s.i++
			case isIdentStart(c):
				out.grouping = append(out.grouping, s.ident())
			default:
				return fmt.Errorf("at %d: %s ( ... without )", s.i, w)
			}
		}
	case slices.Contains(operatorWords, w), slices.Contains(aggregations, w), s.peek() == '(':
		return nil
	}
	sel := selector{metric: w}
	if s.peek() == '{' {
		s.i++
		for {
			switch c := s.peek(); {
			case c == '}':
				s.i++
				out.selectors = append(out.selectors, sel)
				return nil
			case c == ',':
				s.i++
			case isIdentStart(c):
				label := s.ident()
				s.space()
				op := ""
				for s.i < len(s.q) && strings.IndexByte("=!~", s.q[s.i]) >= 0 {
					op += string(s.q[s.i])
					s.i++
				}
				if !slices.Contains([]string{"=", "!=", "=~", "!~"}, op) {
					return fmt.Errorf("at %d: label %s without a matcher", s.i, label)
				}
				if c := s.peek(); c != '"' && c != '\'' && c != '`' {
					return fmt.Errorf("at %d: label %s matched to no string", s.i, label)
				}
				if _, err := s.str(); err != nil {
					return err
				}
				sel.labels = append(sel.labels, label)
			default:
				return fmt.Errorf("at %d: a selector of %s without }", s.i, w)
			}
		}
	}
	out.selectors = append(out.selectors, sel)
	return nil
}
