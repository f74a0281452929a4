package store

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/history"
)

// TestWriteLaps checks that a traced write says where its time went, part
// by part in the order they run, and that an untraced one says nothing.
func TestWriteLaps(t *testing.T) {
	recs := addRecords(t, 1000) // a spec large enough to be kept in chunks
	var trace bytes.Buffer
	st := open(t, t.TempDir())
	st.Trace = &trace
	lap := regexp.MustCompile(`^ +[0-9]+\.[0-9] ms  store: (.*)$`)
	// A label's figures vary; the words before them do not.
	label := regexp.MustCompile(` \(.*\)$`)
	laps := func() []string {
		var got []string
		for _, line := range strings.Split(strings.TrimSuffix(trace.String(), "\n"), "\n") {
			m := lap.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("line %q is not a store's lap", line)
			}
			got = append(got, label.ReplaceAllString(m[1], ""))
		}
		return got
	}
	put := func(gen int) {
		r := recs[gen%2]
		r.Generation, r.AppliedAt = gen, time.Now().UTC()
		e := history.Entry{Infra: r.Name, Generation: gen, Verb: history.Apply, Who: "test", Via: history.API,
			SpecFile: r.SpecFile, Spec: history.Text(r.Spec)}
		trace.Reset()
		if _, err := st.PutWithHistory(r, e); err != nil {
			t.Fatal(err)
		}
	}
	before := []string{"spec cut into chunks", "value's JSON", "namespaces' frame", "value compressed around it",
		"resources hashed", "waited for this process's other writes", "writer's lock taken", "state.db: opened",
		"state.db: value, spec's and resources' chunks put", "state.db: history entry put",
		"state.db: space set aside to take it back", "state.db: commit"}
	after := []string{"files closed, writer's lock released", "caches kept"}

	// The first write finds no good copy to mirror: it makes one whole.
	put(1)
	want := append(append(append([]string{}, before...), "good copy: made anew of the whole file"), after...)
	if got := laps(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("first write's laps\n%q, want\n%q", got, want)
	}
	// The next is mirrored: the good copy takes the same puts.
	put(2)
	want = append(append(append([]string{}, before...), "good copy: opened",
		"good copy: value, spec's and resources' chunks put", "good copy: history entry put", "good copy: commit"), after...)
	if got := laps(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("mirrored write's laps\n%q, want\n%q", got, want)
	}
	if !strings.Contains(trace.String(), "write and sync") {
		t.Errorf("a commit's lap does not say what its write and sync took:\n%s", trace.String())
	}

	st.Trace = nil
	put(3)
	if trace.Len() != 0 {
		t.Errorf("an untraced write traced:\n%s", trace.String())
	}
}
