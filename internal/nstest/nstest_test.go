package nstest

import (
	"os"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

func TestInfraNamesFitAndAreThisRunsOwn(t *testing.T) {
	for _, base := range []string{"it", "itdestroy", "a-name-much-too-long-for-a-spec", "ends-with-dash-"} {
		name := Infra(base)
		if !strings.HasSuffix(name, "-"+RunTag) {
			t.Errorf("Infra(%q) = %q, without the run's tag %s", base, name, RunTag)
		}
		src := "name: " + name + "\nhosts: [{name: h1, nics: [{name: eth0, speed: 1Gbit}]}]\n"
		if _, err := spec.Load("t.yaml", []byte(src)); err != nil {
			t.Errorf("Infra(%q) = %q, which a spec refuses: %v", base, name, err)
		}
	}
	if src, name := Rename(t, "# c\nname: demo\nhosts: []\n"); name != Infra("demo") || !strings.Contains(src, "\nname: "+name+"\n") {
		t.Errorf("Rename: %q, %q", name, src)
	}
}

// The bare path carries traffic, never more than its rate, and goes away.
func TestCapacityOfABarePath(t *testing.T) {
	RequireRoot(t)
	const rate = 50e6
	c := Capacity(t, rate)
	if c <= 0 || c > 1.05*rate {
		t.Errorf("a bare path shaped to 50 Mbit carried %.1f Mbit/s", c/1e6)
	}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.Contains(e.Name(), RunTag) {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
}
