package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/nstest"
)

const (
	walkthroughScript = "../../scripts/operations-walkthrough.sh"
	operationsDoc     = "../../docs/operations.md"
)

// The walk-through of docs/operations.md runs as written, on one machine:
// the script checks every exit status (diff's 0 and 1 among them) and that
// a snapshot restored into a fresh state directory stores the spec applied
// byte for byte, and leaves nothing of its infrastructure behind.
func TestOperationsWalkthrough(t *testing.T) {
	requireRoot(t)
	infra := nstest.Infra("shop")
	cmd := exec.Command("sh", "scripts/operations-walkthrough.sh", vnetBin, infra)
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "walk-through done\n") {
		t.Fatalf("the walk-through: %v\n%s", err, out)
	}
	for _, want := range []string{"no change", "~ vnic eth0 of vm web2: ip 10.60.0.12/24 -> 10.60.0.22/24",
		"rolled back " + infra + " to generation 1", "(1 VNI, 3 MACs pinned)", "the restored spec is the one applied",
		"web1 reaches web2 again"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the walk-through does not say %q", want)
		}
	}
	if left := nstest.Namespaces(infra); len(left) != 0 {
		t.Errorf("the walk-through left %v", left)
	}
}

// The steps docs/operations.md lists are the script's, in its order, and
// the script runs no vnet command the page leaves out (but exec, which
// only sends traffic).
func TestOperationsDocMatchesWalkthrough(t *testing.T) {
	script, err := os.ReadFile(walkthroughScript)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	steps := scriptSteps(t, string(script))
	documented := docSteps(t, string(doc))
	i := 0
	for _, d := range documented {
		for i < len(steps) && !strings.HasPrefix(steps[i], d) {
			i++
		}
		if i == len(steps) {
			t.Fatalf("the page's step %q is not the script's (in the page's order): the script runs\n%s", d, strings.Join(steps, "\n"))
		}
		i++
	}
	for _, s := range steps {
		if !strings.Contains(s, " exec ") && !documentedStep(documented, s) {
			t.Errorf("the script runs %q, which the page leaves out", s)
		}
	}
}

func documentedStep(documented []string, step string) bool {
	for _, d := range documented {
		if strings.HasPrefix(step, d) {
			return true
		}
	}
	return false
}

var scriptNames = strings.NewReplacer(`"$VNET"`, "vnet", `"$INFRA"`, "shop", `"$WORK/fresh"`, "fresh", `"$WORK/`, "", `"`, "")

// scriptSteps are the vnet commands between the script's walkthrough
// marks, written as the page writes them.
func scriptSteps(t *testing.T, script string) []string {
	t.Helper()
	_, body, ok := strings.Cut(script, "# --8<-- walkthrough\n")
	body, _, ok2 := strings.Cut(body, "# -->8--")
	if !ok || !ok2 {
		t.Fatal("the script has no walkthrough marks")
	}
	var steps []string
	for _, l := range strings.Split(body, "\n") {
		l = regexp.MustCompile(`^expect [0-9] `).ReplaceAllString(l, "")
		if rest, ok := strings.CutPrefix(l, "v "); ok {
			l = "vnet " + rest
		}
		if l = scriptNames.Replace(l); strings.HasPrefix(l, "vnet ") {
			steps = append(steps, l)
		}
	}
	return steps
}

// docSteps are the commands of the page's walk-through block, without
// their comments and redirections.
func docSteps(t *testing.T, doc string) []string {
	t.Helper()
	_, body, ok := strings.Cut(doc, "The steps, with `shop` for the")
	_, body, ok2 := strings.Cut(body, "```sh\n")
	body, _, ok3 := strings.Cut(body, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("the page has no walk-through steps")
	}
	var steps []string
	for _, l := range strings.Split(body, "\n") {
		l, _, _ = strings.Cut(l, "#")
		l, _, _ = strings.Cut(l, ">")
		if l = strings.TrimSpace(l); l != "" {
			steps = append(steps, l)
		}
	}
	return steps
}
