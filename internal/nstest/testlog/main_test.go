package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestSummaryNamesSkipsWithReasons(t *testing.T) {
	events := `{"Action":"run","Package":"m/vnet/internal/x","Test":"TestA"}
{"Action":"output","Package":"m/vnet/internal/x","Test":"TestA","Output":"    a_test.go:3: hello\n"}
{"Action":"output","Package":"m/vnet/internal/x","Test":"TestA","Output":"    a_test.go:4: needs chromium: not installed\n"}
{"Action":"skip","Package":"m/vnet/internal/x","Test":"TestA"}
{"Action":"run","Package":"m/vnet/internal/x","Test":"TestB"}
{"Action":"skip","Package":"m/vnet/internal/x","Test":"TestB"}
{"Action":"run","Package":"m/vnet/internal/x","Test":"TestC"}
{"Action":"output","Package":"m/vnet/internal/x","Test":"TestC","Output":"    c_test.go:9: fine\n"}
{"Action":"pass","Package":"m/vnet/internal/x","Test":"TestC"}
`
	var out bytes.Buffer
	l := &log{out: &out, running: map[string]time.Time{}, said: map[string]string{}}
	l.read(strings.NewReader(events))
	l.summary()
	got := out.String()
	for _, want := range []string{
		"2 tests skipped:",
		"internal/x TestA: needs chromium: not installed",
		"internal/x TestB: (no reason given)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "TestC") {
		t.Errorf("summary names a test that passed:\n%s", got)
	}
}
