package nstest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/plan"
)

// RunTag is this test binary's own suffix for every name it gives the
// kernel. Two test runs on one host, or a test run beside a lab run or a
// user's infrastructure, then never share a namespace, so neither can
// break or delete what the other built.
var RunTag = newRunTag()

func newRunTag() string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// maxInfra is the longest infrastructure name a spec may give.
const maxInfra = 20

// Infra is the name a test's infrastructure goes by in this run: base, cut
// to fit, and "-RunTag". Specs in tests take it through their name: field.
func Infra(base string) string {
	base = strings.TrimRight(base[:min(len(base), maxInfra-1-len(RunTag))], "-")
	return base + "-" + RunTag
}

// Rename sets a spec's top-level name: line to this run's Infra of it and
// returns the new name, for specs a test reads from a file.
func Rename(t testing.TB, src string) (string, string) {
	t.Helper()
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		if base, ok := strings.CutPrefix(l, "name:"); ok {
			name := Infra(strings.TrimSpace(base))
			lines[i] = "name: " + name
			return strings.Join(lines, "\n"), name
		}
	}
	t.Fatal("the spec has no top-level name: line")
	return "", ""
}

// Namespaces lists the namespaces of the named infrastructures, and only
// theirs: a test that checks it left nothing behind must not see what
// other runs on the host are doing.
func Namespaces(infras ...string) []string {
	entries, _ := os.ReadDir(dataplane.NetnsDir)
	var out []string
	for _, e := range entries {
		for _, infra := range infras {
			if strings.HasPrefix(e.Name(), plan.InfraNSPrefix(infra)) {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// OrphanedNamespaces lists the namespaces whose infrastructure name starts
// with infraPrefix and whose mark names a state directory that no longer
// exists. A `vnet lab run` keeps its state in a temporary directory that
// it removes when it ends, so what such a run left behind is exactly this,
// while a lab run of someone else's, still going, is not.
func OrphanedNamespaces(t testing.TB, infraPrefix string) []string {
	t.Helper()
	dp, err := dataplane.New()
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	all, err := dp.VnetNamespaces()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ns := range all {
		m, ok := plan.ParseMark(ns.Mark)
		if !ok || !strings.HasPrefix(m.Infra, infraPrefix) || m.Dir == "" {
			continue
		}
		if _, err := os.Stat(m.Dir); errors.Is(err, os.ErrNotExist) {
			out = append(out, ns.Name)
		}
	}
	return out
}
