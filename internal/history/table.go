package history

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints entries for people, oldest first as `kubectl rollout
// history` does, the entry of the spec in force marked with *:
//
//	SEQ  GEN  WHEN                 VERB      WHO        VIA                SUMMARY
//	1    1    2025-03-01 10:00:00  apply     alice@hv1  cli                +2 hosts, +1 switch, +3 VMs
//	3    3*   2025-03-01 10:09:00  rollback  ci         api 192.0.2.7:4711  from 1: ~1 network (mtu)
//
// Times are printed in loc (time.Local for a terminal).
func WriteTable(w io.Writer, entries []Entry, current int, loc *time.Location) error {
	sorted := append([]Entry(nil), entries...)
	Sort(sorted)
	pinned := inForce(sorted, current)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tGEN\tWHEN\tVERB\tWHO\tVIA\tSUMMARY")
	for i, e := range sorted {
		gen := strconv.Itoa(e.Generation)
		if i == pinned {
			gen += "*"
		}
		via := string(e.Via)
		if e.Remote != "" {
			via += " " + e.Remote
		}
		summary := e.Summary
		if e.From > 0 && (e.Verb == Rollback || e.Verb == Restore) {
			summary = fmt.Sprintf("from %d: %s", e.From, summary)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, gen, e.At.In(loc).Format(time.DateTime), e.Verb,
			oneLine(e.Who), via, oneLine(summary))
	}
	return tw.Flush()
}

// oneLine keeps a field on its line: a name or summary with a line break
// or tab in it would break the table.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
}
