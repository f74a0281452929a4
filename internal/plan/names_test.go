package plan

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// Every name the planner gives a link itself has the form that validation
// refuses for a link a spec names (spec.GeneratedLinkName), so that no
// spec's link meets one of vnet's at apply time: each prefix hashName is
// called with in this package's code, and each fixed name.
func TestGeneratedNamesAreRefusedInSpecs(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	call := regexp.MustCompile(`hashName\("([a-z]+)"`)
	prefixes := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllSubmatch(src, -1) {
			prefixes[string(m[1])] = true
		}
	}
	if len(prefixes) < 8 {
		t.Fatalf("found %d prefixes of generated names; the search lost some", len(prefixes))
	}
	for p := range prefixes {
		if name := hashName(p, "x"); !spec.GeneratedLinkName(name) {
			t.Errorf("%s (hashName(%q, ...)) is not refused as a spec's link name", name, p)
		}
	}
	for _, name := range []string{UnderlayLinkName, PhysBridge, VNICPortName("i", "vm1", 0), HostPortSwitchPort("vmk0"), HostPortSwitchPortOnHost("i", "h", "vmk0"), HostBridgeName("i", "sw")} {
		if !spec.GeneratedLinkName(name) {
			t.Errorf("%s is not refused as a spec's link name", name)
		}
	}
}

func TestIsVNICPortName(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{VNICPortName("i", "web1", 0), true},
		{VNICPortName("i", "c-ctr-1234", 3), true},
		{"vn0123abcd", true},
		{"vn0123abc", false},
		{"vn0123ABCD", false},
		{"vk0123abcd", false},
		{"eth0", false},
		{"vn0123abcde", false},
	} {
		if got := IsVNICPortName(c.name); got != c.want {
			t.Errorf("IsVNICPortName(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}

// On a real host the ports of every infrastructure share the machine's
// namespace: one VM name in two infrastructures gets two port names, each
// a link name the kernel takes, and each the same at every apply.
func TestVNICPortNameNamesTheInfrastructure(t *testing.T) {
	a, b := VNICPortName("blue", "web1", 0), VNICPortName("green", "web1", 0)
	if a == b {
		t.Errorf("web1's eth0 of blue and of green are both %s", a)
	}
	for _, name := range []string{a, b} {
		if len(name) > 15 || !IsVNICPortName(name) {
			t.Errorf("%s is no vNIC port name the kernel takes", name)
		}
	}
	if VNICPortName("blue", "web1", 0) != a || VNICPortName("blue", "web1", 1) == a {
		t.Errorf("a port's name is not stable, or two vNICs share one")
	}
}
