package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vnet-project/vnet/internal/quote"
)

// A param is a query parameter a route takes. The routing table declares
// every route's; checkQuery refuses any other, one given twice, and a
// value not of its kind, before the handler runs, so that a misspelled
// `?dryrun=true` is an error rather than an apply for real. The handlers
// read the checked values through queryOf. TestOpenAPIMatchesRoutes holds
// openapi.json to the same declarations.
type param struct {
	Name string
	Kind paramKind
	// Min and Max bound a number or a duration (in nanoseconds); Default
	// is its value when the parameter is left out.
	Min, Max, Default int64
	// Optional says a number left out has no default: the handler reads
	// 0, below Min, as "not given".
	Optional bool
	// Words are a wordParam's values; the first is its default.
	Words []string
}

// maxGeneration bounds a generation in a query.
const maxGeneration = 1<<31 - 1

// generation is a query parameter naming one of an infrastructure's
// generations, from 1; left out, the handler chooses (the one in force).
func generation(name string) param {
	return param{Name: name, Kind: intParam, Min: 1, Max: maxGeneration, Optional: true}
}

// paramKind is what a parameter's value is.
type paramKind int

const (
	boolParam     paramKind = iota // true or false
	durationParam                  // a Go duration: 500ms, 30s, 5m
	intParam                       // a decimal integer
	infraParam                     // an infrastructure's name
	wordParam                      // one of the param's Words
	nameParam                      // a name as the spec's objects have: lowercase letters, digits and -
)

// maxObjectName is the longest name the spec takes for a VM, a host or a
// port group.
const maxObjectName = 32

// openAPIType is the kind's schema type in openapi.json.
func (k paramKind) openAPIType() string {
	switch k {
	case boolParam:
		return "boolean"
	case intParam:
		return "integer"
	}
	return "string"
}

func durationBetween(name string, def, lo, hi time.Duration) param {
	return param{Name: name, Kind: durationParam, Min: int64(lo), Max: int64(hi), Default: int64(def)}
}

// query is a request's checked query parameters, by name.
type query map[string]any

type queryKey struct{}

// queryOf is the request's checked query: what checkQuery stored, with the
// route's defaults.
func queryOf(r *http.Request) query {
	q, _ := r.Context().Value(queryKey{}).(query)
	return q
}

func (q query) bool(name string) bool              { b, _ := q[name].(bool); return b }
func (q query) duration(name string) time.Duration { d, _ := q[name].(time.Duration); return d }
func (q query) int(name string) int                { n, _ := q[name].(int); return n }
func (q query) string(name string) string          { s, _ := q[name].(string); return s }

// checkQuery reads a request's query against the route's parameters and
// returns the request carrying the values (see queryOf), or an error
// naming the parameter and what the route takes.
func checkQuery(rt route, r *http.Request) (*http.Request, error) {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fail(http.StatusBadRequest, "the query is not name=value pairs joined by &: "+quote.Q(r.URL.RawQuery))
	}
	byName := map[string]param{}
	for _, p := range rt.Query {
		byName[p.Name] = p
	}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)
	q := query{}
	for _, name := range names {
		p, ok := byName[name]
		if !ok {
			return nil, &httpError{status: http.StatusBadRequest, body: ErrorBody{
				Error: "unknown query parameter " + quote.Q(name) + ": " + rt.takes(name), Field: quote.Escape(quote.Clip(name, quote.ClipBytes))}}
		}
		if len(values[name]) > 1 {
			return nil, failField(http.StatusBadRequest, name, fmt.Sprintf("given %d times: give it once", len(values[name])))
		}
		v, err := p.parse(values[name][0])
		if err != nil {
			return nil, err
		}
		q[name] = v
	}
	for _, p := range rt.Query {
		if _, ok := q[p.Name]; !ok {
			q[p.Name] = p.defaultValue()
		}
	}
	return r.WithContext(context.WithValue(r.Context(), queryKey{}, q)), nil
}

// takes says which parameters the route takes, and which one the unknown
// name was perhaps meant to be.
func (rt route) takes(unknown string) string {
	what := rt.Method + " " + rt.Path
	if len(rt.Query) == 0 {
		return what + " takes no query parameters"
	}
	var names []string
	guess := ""
	for _, p := range rt.Query {
		names = append(names, p.Name)
		if strings.EqualFold(p.Name, unknown) {
			guess = p.Name
		}
	}
	msg := what + " takes " + strings.Join(names, ", ")
	if guess != "" {
		msg += " (names are case-sensitive: " + guess + "?)"
	}
	return msg
}

// parse checks one value of the parameter. A value given empty is not
// taken for the default: the parameter is left out for that.
func (p param) parse(v string) (any, error) {
	switch p.Kind {
	case boolParam:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, failField(http.StatusBadRequest, p.Name, "want true or false, got "+quote.Q(v))
		}
		return b, nil
	case durationParam:
		d, err := time.ParseDuration(v)
		if err != nil || int64(d) < p.Min || int64(d) > p.Max {
			return nil, failField(http.StatusBadRequest, p.Name, fmt.Sprintf("want a duration from %s to %s, like 30s or 5m, got %s",
				time.Duration(p.Min), time.Duration(p.Max), quote.Q(v)))
		}
		return d, nil
	case intParam:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < p.Min || n > p.Max {
			return nil, failField(http.StatusBadRequest, p.Name, fmt.Sprintf("want a number from %d to %d, got %s", p.Min, p.Max, quote.Q(v)))
		}
		return int(n), nil
	case wordParam:
		if !slices.Contains(p.Words, v) {
			return nil, failField(http.StatusBadRequest, p.Name, "want "+strings.Join(p.Words, ", ")+", got "+quote.Q(v))
		}
		return v, nil
	case nameParam:
		if len(v) > maxObjectName || !infraName.MatchString(v) {
			return nil, failField(http.StatusBadRequest, p.Name, fmt.Sprintf("not a name (lowercase letters, digits and -, at most %d): %s", maxObjectName, quote.Q(v)))
		}
		return v, nil
	case infraParam:
		if len(v) > maxInfraName || !infraName.MatchString(v) {
			return nil, failField(http.StatusBadRequest, p.Name, "not an infrastructure name (lowercase letters, digits and -, at most 20): "+quote.Q(v))
		}
		return v, nil
	}
	return nil, fmt.Errorf("query parameter %s: unknown kind %d", p.Name, p.Kind)
}

func (p param) defaultValue() any {
	switch p.Kind {
	case boolParam:
		return p.Default != 0
	case durationParam:
		return time.Duration(p.Default)
	case intParam:
		return int(p.Default)
	case wordParam:
		return p.Words[0]
	}
	return ""
}
