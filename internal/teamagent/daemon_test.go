package teamagent

import "testing"

func TestParseAgentArgs(t *testing.T) {
	for _, c := range []struct {
		argv       []string
		infra, dir string
		ok         bool
	}{
		{[]string{"/usr/bin/vnet", "agent", "run", "team", "--state-dir", "/var/lib/x"}, "team", "/var/lib/x", true},
		{[]string{"bin/vnet", "--state-dir=/s", "agent", "run", "demo", "--tick", "1s"}, "demo", "/s", true},
		{[]string{"vnet", "agent", "run", "demo"}, "demo", "", true},
		{[]string{"vnet", "apply", "demo.yaml"}, "", "", false},
		{[]string{"vnet", "agent", "run"}, "", "", false},
		{[]string{"sshd", "agent", "run", "demo"}, "", "", false},
		{[]string{"vnet", "exec", "web1", "--", "agent", "run", "x"}, "", "", false},
	} {
		infra, dir, ok := parseAgentArgs(c.argv)
		if infra != c.infra || dir != c.dir || ok != c.ok {
			t.Errorf("parseAgentArgs(%q) = %q, %q, %v; want %q, %q, %v", c.argv, infra, dir, ok, c.infra, c.dir, c.ok)
		}
	}
}

// A second claim of the same infrastructure fails while the first holds
// it, and succeeds once it is released.
func TestClaimIsExclusive(t *testing.T) {
	dir := t.TempDir()
	release, err := Claim(dir, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Claim(dir, "x"); err == nil {
		t.Fatal("a second claim succeeded while the first holds it")
	}
	if pid, ok := recordedPID(dir, "x"); !ok || pid <= 0 {
		t.Errorf("no pid recorded")
	}
	release()
	again, err := Claim(dir, "x")
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	again()
}
