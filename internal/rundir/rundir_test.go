package rundir

import "testing"

func TestDir(t *testing.T) {
	cases := []struct{ env, want string }{
		{"", Default},
		{"/tmp/vnet-run-1", "/tmp/vnet-run-1"},
	}
	for _, c := range cases {
		t.Setenv(Env, c.env)
		if got := Dir(); got != c.want {
			t.Errorf("with %s=%q: Dir() = %q, want %q", Env, c.env, got, c.want)
		}
	}
}
