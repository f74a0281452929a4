package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/service"
)

func TestPrintAttachedNamesAFewKeptVMs(t *testing.T) {
	for _, tc := range []struct {
		kept     int
		lines    int
		moreLine string
	}{
		{kept: 1, lines: 1},
		{kept: keptListed, lines: keptListed},
		{kept: 1000, lines: keptListed, moreLine: "and 990 more"},
	} {
		t.Run(fmt.Sprint(tc.kept), func(t *testing.T) {
			a := &service.Attached{}
			for i := range tc.kept {
				a.Kept = append(a.Kept, service.AttachedVM{VM: fmt.Sprintf("c-%d", i), Host: "hv1", Container: fmt.Sprint(i)})
			}
			var out strings.Builder
			printAttached(&out, a, false)
			if got := strings.Count(out.String(), "  VM c-"); got != tc.lines {
				t.Errorf("named %d VMs, want %d:\n%s", got, tc.lines, out.String())
			}
			if tc.moreLine != "" && !strings.Contains(out.String(), tc.moreLine) {
				t.Errorf("no %q in:\n%s", tc.moreLine, out.String())
			}
		})
	}
}
