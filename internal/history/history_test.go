package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

var t0 = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

// entries makes a history from a compact description: "apply:1" is an
// apply that left generation 1, made a minute after the entry before.
func entries(desc ...string) []Entry {
	var out []Entry
	for i, d := range desc {
		verb, gen, _ := strings.Cut(d, ":")
		e := Entry{Infra: "demo", Seq: i + 1, Verb: Verb(verb), At: t0.Add(time.Duration(i) * time.Minute), Who: "alice@hv1", Via: CLI}
		fmt.Sscan(gen, &e.Generation)
		if Verb(verb).ChangesSpec() || Verb(verb) == Destroy {
			e.Spec = Text(fmt.Sprintf("name: demo # %d\n", e.Generation))
		}
		out = append(out, e)
	}
	return out
}

func seqs(es []Entry) string {
	var s []string
	for _, e := range es {
		s = append(s, fmt.Sprint(e.Seq))
	}
	return strings.Join(s, " ")
}

func TestPrune(t *testing.T) {
	history := entries("apply:1", "apply:2", "pause:2", "resume:2", "apply:3", "rollback:4", "destroy:0", "apply:1")
	now := t0.Add(10 * time.Minute) // the entries are 10 to 3 minutes old
	tests := []struct {
		name          string
		r             Retention
		current       int
		kept, dropped string
	}{
		{"the default keeps all of a short history", Retention{}, 1, "1 2 3 4 5 6 7 8", ""},
		{"by count", Retention{MaxEntries: 3}, 1, "6 7 8", "1 2 3 4 5"},
		{"one: only the current", Retention{MaxEntries: 1}, 1, "8", "1 2 3 4 5 6 7"},
		{"by age", Retention{MaxAge: 5 * time.Minute}, 1, "6 7 8", "1 2 3 4 5"},
		{"by count and age, the stricter wins", Retention{MaxEntries: 2, MaxAge: 5 * time.Minute}, 1, "7 8", "1 2 3 4 5 6"},
		{"the current is kept however old", Retention{MaxEntries: 2}, 2, "2 8", "1 3 4 5 6 7"},
		{"the current is the entry that holds its spec, not a pause or resume after it", Retention{MaxAge: time.Minute}, 2, "2", "1 3 4 5 6 7 8"},
		{"the current is the newest entry of its generation that holds its spec", Retention{MaxAge: time.Minute}, 1, "8", "1 2 3 4 5 6 7"},
		{"nothing current once destroyed", Retention{MaxAge: time.Second}, 0, "", "1 2 3 4 5 6 7 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, dropped := tt.r.Prune(history, tt.current, now)
			if seqs(kept) != tt.kept || seqs(dropped) != tt.dropped {
				t.Errorf("kept %q, dropped %q; want %q and %q", seqs(kept), seqs(dropped), tt.kept, tt.dropped)
			}
		})
	}
}

// Prune keeps at most MaxEntries, whatever order it is given the entries in.
func TestPruneBounds(t *testing.T) {
	var many []Entry
	for i := 500; i >= 1; i-- {
		many = append(many, Entry{Seq: i, Generation: i, Verb: Apply, At: t0})
	}
	kept, dropped := Retention{MaxEntries: 50}.Prune(many, 500, t0)
	if len(kept) != 50 || len(dropped) != 450 || kept[0].Seq != 451 || kept[49].Seq != 500 {
		t.Errorf("kept %d (%d..%d), dropped %d", len(kept), kept[0].Seq, kept[len(kept)-1].Seq, len(dropped))
	}
	kept, _ = Retention{}.Prune(many, 500, t0)
	if len(kept) != DefaultMaxEntries {
		t.Errorf("the default kept %d", len(kept))
	}
}

// DropsOldest, where it can tell, drops what Prune does: the oldest
// entries, as many as Prune drops.
func TestDropsOldestAgreesWithPrune(t *testing.T) {
	verbs := []string{"apply", "pause", "resume", "rollback", "destroy", "restore"}
	rnd := rand.New(rand.NewPCG(1, 2))
	told := 0
	for range 5000 {
		n := 1 + rnd.IntN(12)
		desc := make([]string, n)
		for i := range desc {
			desc[i] = fmt.Sprintf("%s:%d", verbs[rnd.IntN(len(verbs))], rnd.IntN(4))
		}
		history := entries(desc...)
		newest := history[n-1]
		current := newest.Generation
		if rnd.IntN(4) == 0 {
			current = rnd.IntN(4)
		}
		r := Retention{MaxEntries: 1 + rnd.IntN(10)}
		if rnd.IntN(8) == 0 {
			r.MaxAge = time.Duration(1+rnd.IntN(10)) * time.Minute
		}
		drop, ok := r.DropsOldest(n, newest, current)
		if !ok {
			continue
		}
		told++
		_, dropped := r.Prune(history, current, t0.Add(time.Hour))
		if want := seqs(history[:drop]); seqs(dropped) != want {
			t.Fatalf("%v, retention %+v, current %d: DropsOldest drops %q, Prune %q", desc, r, current, want, seqs(dropped))
		}
	}
	if told < 2500 {
		t.Errorf("DropsOldest told only %d of 5000 histories", told)
	}
}

func TestRetentionValidate(t *testing.T) {
	for _, r := range []Retention{{}, {MaxEntries: 1}, {MaxEntries: MaxEntriesLimit}, {MaxAge: time.Hour}} {
		if err := r.Validate(); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
	for _, r := range []Retention{{MaxEntries: -1}, {MaxEntries: MaxEntriesLimit + 1}, {MaxAge: -time.Hour}} {
		if err := r.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", r, err)
		}
	}
}

func TestParseAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "720h": 720 * time.Hour, "1.5d": 36 * time.Hour, " 90m ": 90 * time.Minute} {
		if got, err := ParseAge(in); err != nil || got != want {
			t.Errorf("ParseAge(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1d", "d", "0d", "1y", "1e300d", "abc"} {
		if _, err := ParseAge(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseAge(%q): %v, want ErrInvalid", in, err)
		}
	}
}

func TestFindAndPrevious(t *testing.T) {
	// Generation 1 twice: before a destroy and after.
	history := entries("apply:1", "apply:2", "pause:2", "apply:3", "destroy:0", "apply:1", "apply:2")
	for _, tt := range []struct {
		gen     int
		wantSeq int
	}{{1, 6}, {2, 7}, {3, 4}} {
		e, err := Find(history, tt.gen)
		if err != nil || e.Seq != tt.wantSeq {
			t.Errorf("Find(%d) = %d, %v; want entry %d", tt.gen, e.Seq, err, tt.wantSeq)
		}
	}
	if _, err := Find(history, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("Find(0): %v", err)
	}
	if _, err := Find(history, 9); !errors.Is(err, ErrNotFound) {
		t.Errorf("Find(9): %v", err)
	}
	// After a destroy, the previous is the last generation before it.
	for _, tt := range []struct{ current, wantSeq int }{{2, 6}, {1, 4}, {3, 2}, {0, 4}} {
		e, err := Previous(history, tt.current)
		if err != nil || e.Seq != tt.wantSeq {
			t.Errorf("Previous(%d) = %d, %v; want entry %d", tt.current, e.Seq, err, tt.wantSeq)
		}
	}
	if _, err := Previous(history, 4); !errors.Is(err, ErrNotFound) {
		t.Errorf("Previous(4): %v", err)
	}
	if _, err := Previous(entries("apply:1", "pause:1"), 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("Previous of the first generation: %v", err)
	}
	if Next(history) != 8 || Next(nil) != 1 {
		t.Errorf("Next: %d, %d", Next(history), Next(nil))
	}
}

func TestValidate(t *testing.T) {
	good := entries("apply:1")[0]
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(*Entry){
		"verb":       func(e *Entry) { e.Verb = "explode" },
		"face":       func(e *Entry) { e.Via = "telepathy" },
		"seq":        func(e *Entry) { e.Seq = 0 },
		"generation": func(e *Entry) { e.Generation = -1 },
	} {
		e := good
		bad(&e)
		if err := e.Validate(); err == nil {
			t.Errorf("%s: accepted %+v", name, e)
		}
	}
}

func TestEncodings(t *testing.T) {
	e := entries("apply:1", "rollback:2")[1]
	e.From, e.Remote, e.Via, e.Who, e.Summary = 1, "192.0.2.7:4711", API, "ci", "~1 network (mtu)"
	e.Spec = Text("name: demo\nnetworks:\n  - {name: blue, mtu: 1400}\n")
	j, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"infra":"demo","seq":2,"generation":2,"verb":"rollback","at":"2025-03-01T10:01:00Z","who":"ci","via":"api","remote":"192.0.2.7:4711",` +
		`"summary":"~1 network (mtu)","from":1,"spec":"name: demo\nnetworks:\n  - {name: blue, mtu: 1400}\n"}`
	if string(j) != want {
		t.Errorf("JSON:\n%s\nwant:\n%s", j, want)
	}
	y, err := yaml.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), "spec: |\n    name: demo\n") {
		t.Errorf("YAML does not show the spec as a block:\n%s", y)
	}
	for _, form := range []struct {
		name string
		data []byte
		dec  func([]byte, any) error
	}{{"JSON", j, json.Unmarshal}, {"YAML", y, yaml.Unmarshal}} {
		var back Entry
		if err := form.dec(form.data, &back); err != nil {
			t.Fatalf("%s: %v", form.name, err)
		}
		if !back.At.Equal(e.At) || string(back.Spec) != string(e.Spec) || back.Head().Spec != nil {
			t.Errorf("%s round trip: %+v", form.name, back)
		}
		back.At = e.At
		if fmt.Sprint(back) != fmt.Sprint(e) {
			t.Errorf("%s round trip:\n%+v\nwant\n%+v", form.name, back, e)
		}
	}
	if h, _ := json.Marshal(e.Head()); strings.Contains(string(h), "spec") {
		t.Errorf("a head carries its spec: %s", h)
	}
}

// A spec that is not UTF-8 survives both encodings.
func TestTextNotUTF8(t *testing.T) {
	raw := Text("\xff\xfen\x00a\x00m\x00e\x00")
	for _, codec := range []struct {
		name string
		enc  func(any) ([]byte, error)
		dec  func([]byte, any) error
	}{{"JSON", json.Marshal, json.Unmarshal}, {"YAML", yaml.Marshal, yaml.Unmarshal}} {
		b, err := codec.enc(Entry{Spec: raw})
		if err != nil {
			t.Fatalf("%s: %v", codec.name, err)
		}
		var back Entry
		if err := codec.dec(b, &back); err != nil || !bytes.Equal(back.Spec, raw) {
			t.Errorf("%s: %v, %q from\n%s", codec.name, err, back.Spec, b)
		}
	}
}

func TestWriteTable(t *testing.T) {
	history := entries("apply:1", "apply:2", "rollback:3", "pause:3")
	history[3].Summary = "paused VM web1"
	history[2].Who, history[2].Via, history[2].Remote, history[2].From, history[2].Summary = "ci\tbot", API, "192.0.2.7:4711", 1, "~1 network (mtu)"
	history[0].Summary = "+2 hosts, +1 switch,\n+3 VMs"
	var b strings.Builder
	if err := WriteTable(&b, []Entry{history[2], history[3], history[0], history[1]}, 3, time.UTC); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"SEQ  GEN  WHEN                 VERB      WHO        VIA                 SUMMARY\n" +
		"1    1    2025-03-01 10:00:00  apply     alice@hv1  cli                 +2 hosts, +1 switch, +3 VMs\n" +
		"2    2    2025-03-01 10:01:00  apply     alice@hv1  cli                 \n" +
		"3    3*   2025-03-01 10:02:00  rollback  ci bot     api 192.0.2.7:4711  from 1: ~1 network (mtu)\n" +
		"4    3    2025-03-01 10:03:00  pause     alice@hv1  cli                 paused VM web1\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestLocalUser(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	ok := func(s string) func() (string, error) { return func() (string, error) { return s, nil } }
	fail := func() (string, error) { return "", errors.New("no") }
	for _, tt := range []struct {
		env           map[string]string
		current, host func() (string, error)
		want          string
	}{
		{nil, ok("alice"), ok("hv1"), "alice@hv1"},
		{map[string]string{"SUDO_USER": "alice"}, ok("root"), ok("hv1"), "alice@hv1 (sudo)"},
		{map[string]string{"SUDO_USER": "root"}, ok("root"), ok("hv1"), "root@hv1"},
		{map[string]string{"USER": "bob"}, fail, fail, "bob@localhost"},
		{nil, fail, ok("hv1"), "unknown@hv1"},
	} {
		if got := localUser(env(tt.env), tt.current, tt.host); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.env, got, tt.want)
		}
	}
	if LocalUser() == "" {
		t.Error("LocalUser is empty")
	}
}

func TestRetentionText(t *testing.T) {
	for _, r := range []Retention{{}, {MaxEntries: 50}, {MaxAge: 30 * 24 * time.Hour}, {MaxEntries: 5, MaxAge: 90 * time.Minute}} {
		j, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Retention
		if err := json.Unmarshal(j, &back); err != nil || back != r {
			t.Errorf("%+v: JSON %s read back as %+v, %v", r, j, back, err)
		}
		y, _ := yaml.Marshal(r)
		back = Retention{}
		if err := yaml.Unmarshal(y, &back); err != nil || back != r {
			t.Errorf("%+v: YAML %s read back as %+v, %v", r, y, back, err)
		}
	}
	if j, _ := json.Marshal(Retention{MaxEntries: 5, MaxAge: 30 * 24 * time.Hour}); string(j) != `{"max_entries":5,"max_age":"30d"}` {
		t.Errorf("JSON %s", j)
	}
	for _, bad := range []string{`{"max_entries":-1}`, `{"max_age":"soon"}`, `{"max_age":5}`, `[]`} {
		var r Retention
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("%s: accepted as %+v", bad, r)
		}
	}
	// The effective form writes the defaults out, and reads back as them.
	for _, tt := range []struct {
		r    Retention
		want string
	}{{Retention{}, `{"max_entries":100,"max_age":"any"}`}, {Retention{MaxEntries: 5, MaxAge: 48 * time.Hour}, `{"max_entries":5,"max_age":"2d"}`}} {
		j, _ := json.Marshal(tt.r.Effective())
		var back Retention
		if err := json.Unmarshal(j, &back); string(j) != tt.want || err != nil || back.Effective() != tt.r.Effective() {
			t.Errorf("%+v: effective %s (want %s), read back as %+v, %v", tt.r, j, tt.want, back, err)
		}
	}
	if s := (Retention{MaxEntries: 3, MaxAge: 48 * time.Hour}).String(); s != "the newest 3 entries of at most 2d (and the entry of the generation in force)" {
		t.Errorf("String: %s", s)
	}
}

// A store lists heads without specs: Find and Previous find the entries
// whose verbs store one.
func TestFindAmongHeads(t *testing.T) {
	heads := Heads(entries("apply:1", "apply:2", "pause:2", "destroy:0", "apply:1"))
	if e, err := Find(heads, 2); err != nil || e.Seq != 2 {
		t.Errorf("Find(2) among heads: %d, %v", e.Seq, err)
	}
	if e, err := Previous(heads, 0); err != nil || e.Seq != 2 {
		t.Errorf("Previous(0) among heads: %d, %v", e.Seq, err)
	}
}
