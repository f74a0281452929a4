// Package archtest checks the package map of docs/architecture.md against
// the code: every package is in the table, each imports only packages on
// lower floors, only packages that say so import the kernel's libraries,
// and packages that serve tests are imported by tests only.
package archtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/vnet-project/vnet"

// testFloor is the floor of the packages that serve tests.
const testFloor = -1

// kernelLibraries are the modules that talk to the kernel; a package whose
// row says it does not know the kernel imports none of them.
var kernelLibraries = []string{
	"github.com/vishvananda/netlink",
	"github.com/vishvananda/netns",
	"github.com/google/nftables",
	"github.com/mdlayher/netlink",
	"github.com/safchain/ethtool",
	"github.com/cilium/ebpf",
}

// row is one package of the table.
type row struct {
	floor  int
	kernel bool // the row says it knows the kernel
}

func TestImportsFollowTheLayering(t *testing.T) {
	root := moduleRoot(t)
	table := readTable(t, filepath.Join(root, "docs", "architecture.md"))
	imports := listImports(t, root)

	for pkg := range table {
		if _, ok := imports[pkg]; !ok {
			t.Errorf("docs/architecture.md lists %s, which is no package", pkg)
		}
	}
	for pkg, deps := range imports {
		r, ok := table[pkg]
		if !ok {
			t.Errorf("%s is missing from the package table of docs/architecture.md: add it with its floor", pkg)
			continue
		}
		for _, dep := range deps {
			if lib, ok := kernelLibrary(dep); ok && !r.kernel {
				t.Errorf("%s imports %s, but docs/architecture.md says it does not know the kernel", pkg, lib)
			}
			d, ok := table[dep]
			if !ok {
				continue // outside the module, or reported above
			}
			switch {
			case d.floor == testFloor && r.floor != testFloor:
				t.Errorf("%s imports %s, which serves tests only", pkg, dep)
			case r.floor != testFloor && d.floor >= r.floor:
				t.Errorf("%s (floor %d) imports %s (floor %d): an import runs to the same floor or up", pkg, r.floor, dep, d.floor)
			}
		}
		if r.kernel && r.floor != testFloor && pkg != module+"/internal/dataplane" && !strings.HasPrefix(pkg, module+"/internal/dataplane/") {
			t.Errorf("%s says it knows the kernel: only the dataplane and its parts do", pkg)
		}
	}
}

// kernelLibrary reports which of kernelLibraries an import path is of.
func kernelLibrary(path string) (string, bool) {
	for _, lib := range kernelLibraries {
		if path == lib || strings.HasPrefix(path, lib+"/") {
			return lib, true
		}
	}
	return "", false
}

// moduleRoot is the directory of go.mod, above the test's own.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// readTable reads the package table: rows whose first cell names packages
// in backquotes and whose second is the floor, a number or "test".
func readTable(t *testing.T, path string) map[string]row {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]row{}
	inTable := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "| package | floor |") {
			inTable = true
			continue
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			t.Fatalf("%s: a row of the package table without floor and kernel: %q", path, line)
		}
		r := row{kernel: strings.HasPrefix(strings.TrimLeft(strings.TrimSpace(cells[2]), "*"), "yes")}
		switch floor := strings.TrimSpace(cells[1]); floor {
		case "test":
			r.floor = testFloor
		default:
			n, err := strconv.Atoi(floor)
			if err != nil || n < 0 {
				t.Fatalf("%s: floor %q of %s: want a number from 0, or test", path, floor, cells[0])
			}
			r.floor = n
		}
		names := strings.Split(cells[0], "`")
		for i := 1; i < len(names); i += 2 {
			out[module+"/"+names[i]] = r
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no package table (a header \"| package | floor |\")", path)
	}
	return out
}

// listImports lists the module's packages and what each imports, without
// its tests.
func listImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		out[f[0]] = f[1:]
	}
	return out
}
