package events

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestJournalKeepsEventsAcrossOpens(t *testing.T) {
	dir := t.TempDir()
	if err := In(dir).Append(Event{Action: Apply, Infra: "a", OK: true}); err != nil {
		t.Fatal(err)
	}
	if err := In(dir).Append(Event{Action: Failover, Infra: "b", Host: "esx1", Port: "vm1/eth0", From: "u1", To: "u2"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		infra string
		limit int
		want  []string
	}{
		{"", 10, []string{Failover, Apply}},
		{"a", 10, []string{Apply}},
		{"", 1, []string{Failover}},
		{"c", 10, nil},
	}
	for _, tc := range tests {
		got, err := In(dir).Newest(tc.infra, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, ev := range got {
			actions = append(actions, ev.Action)
		}
		if fmt.Sprint(actions) != fmt.Sprint(tc.want) {
			t.Errorf("Newest(%q, %d) = %v, want %v", tc.infra, tc.limit, actions, tc.want)
		}
	}
}

func TestJournalStaysBounded(t *testing.T) {
	j := &Journal{Path: filepath.Join(t.TempDir(), FileName), MaxBytes: 4096}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if err := j.Append(Event{Action: LBTMove, Infra: "x", Message: fmt.Sprintf("w%d-%d", w, i)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	st, err := os.Stat(j.Path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 4096+maxLine {
		t.Errorf("journal is %d bytes, bound 4096", st.Size())
	}
	got, err := j.Newest("", 1000)
	if err != nil || len(got) == 0 {
		t.Fatalf("Newest: %d events, %v", len(got), err)
	}
	if !strings.HasSuffix(got[0].Message, "-99") {
		t.Errorf("newest event %q is not one of the last written", got[0].Message)
	}
}

func TestJournalSkipsTornLines(t *testing.T) {
	dir := t.TempDir()
	j := In(dir)
	if err := j.Append(Event{Action: Apply, Infra: "a"}); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(j.Path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":"2026-01-01T00:00:00Z","act`)
	f.Close()
	got, err := j.Newest("", 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("got %v %v, want the one whole event", got, err)
	}
	if err := j.Append(Event{Action: Destroy, Infra: "a"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := j.Newest("", 10); len(got) != 2 || got[0].Action != Destroy {
		t.Errorf("after a torn line, got %+v, want the destroy and the apply", got)
	}
}
