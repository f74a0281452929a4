package dataplane

import (
	"errors"
	"os/exec"
	"slices"
	"testing"
)

// What `vnet exec NODE -- CMD` runs, without entering any namespace.
func TestCommandPath(t *testing.T) {
	const self = "/opt/vnet/bin/vnet"
	onPath := map[string]string{"ip": "/usr/sbin/ip", "/usr/bin/vnet": "/usr/bin/vnet", "/opt/vnet/bin/helper": "/opt/vnet/bin/helper"}
	lookPath := func(name string) (string, error) {
		if p, ok := onPath[name]; ok {
			return p, nil
		}
		return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
	}
	for _, tc := range []struct{ name, want string }{
		{"vnet", self},                     // this binary, whatever PATH holds
		{"ip", "/usr/sbin/ip"},             // PATH as usual
		{"/usr/bin/vnet", "/usr/bin/vnet"}, // a path is taken as given
		{"helper", "/opt/vnet/bin/helper"}, // beside vnet: the end of the command's PATH
		{"nosuch", ""},
		{"./nosuch", ""},
	} {
		got, err := CommandPath(tc.name, self, lookPath)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("CommandPath(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
		if tc.want == "" && !errors.Is(err, exec.ErrNotFound) {
			t.Errorf("CommandPath(%q): error %v, want one that says not found", tc.name, err)
		}
	}
}

func TestPathWithSelf(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env, want []string
	}{
		{"appended", []string{"HOME=/root", "PATH=/usr/bin:/bin"}, []string{"HOME=/root", "PATH=/usr/bin:/bin:/opt/vnet/bin"}},
		{"already there", []string{"PATH=/opt/vnet/bin:/usr/bin"}, []string{"PATH=/opt/vnet/bin:/usr/bin"}},
		{"empty", []string{"PATH="}, []string{"PATH=/opt/vnet/bin"}},
		{"unset", []string{"HOME=/root"}, []string{"HOME=/root", "PATH=" + defaultPath + ":/opt/vnet/bin"}},
	} {
		env := slices.Clone(tc.env)
		if got := PathWithSelf(env, "/opt/vnet/bin"); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
		if !slices.Equal(env, tc.env) {
			t.Errorf("%s: the caller's environment changed to %q", tc.name, env)
		}
	}
}
