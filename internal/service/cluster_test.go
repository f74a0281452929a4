package service

import "testing"

func TestNameLine(t *testing.T) {
	for _, c := range []struct{ head, want string }{
		{"name: dc\nhosts:\n", "dc"},
		{"name: \"dc-1\"\n", "dc-1"},
		{"name: 'dc'\r\n", "dc"},
		{"# a comment\n\nname: dc\n", "dc"},
		{"hosts:\n  - name: hv1\nname: dc\n", "dc"},
		{"hosts:\n  - {name: hv1}\n", ""},
		{"  name: nested\n", ""},
		{"name: dc # a comment\n", ""},
		{"name: {a: b}\n", ""},
		{"name: \"dc\n", ""},
		{"networks:\n- name: n0\n", ""},
		{"", ""},
	} {
		if got := nameLine([]byte(c.head)); got != c.want {
			t.Errorf("nameLine(%q) = %q, want %q", c.head, got, c.want)
		}
	}
}
