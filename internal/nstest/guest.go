package nstest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The guests that the QEMU and libvirt tests boot: this machine's Debian
// kernel with an initramfs of a static Go program as /init and the
// kernel's virtio network modules.

// GuestKernel finds a kernel image and its modules: the running kernel's
// if /boot has it, else the newest image in /boot whose modules exist.
func GuestKernel(t testing.TB) (image, modules string) {
	t.Helper()
	var uts unix.Utsname
	unix.Uname(&uts)
	release := unix.ByteSliceToString(uts.Release[:])
	candidates := []string{"/boot/vmlinuz-" + release}
	more, _ := filepath.Glob("/boot/vmlinuz-*")
	sort.Sort(sort.Reverse(sort.StringSlice(more)))
	candidates = append(candidates, more...)
	for _, img := range candidates {
		version := strings.TrimPrefix(filepath.Base(img), "vmlinuz-")
		dir := filepath.Join("/lib/modules", version)
		if _, err := os.Stat(img); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "modules.dep")); err != nil {
			continue
		}
		if f, err := os.Open(img); err == nil { // readable, not only present
			f.Close()
			return img, dir
		}
	}
	t.Skip("SKIPPED: no kernel image with its modules (/boot/vmlinuz-VERSION and /lib/modules/VERSION/modules.dep); a Debian host has them (apt-get install linux-image-amd64)")
	return "", ""
}

// GuestModules returns the files of the named modules and of every module
// they depend on, each before what needs it, from modules.dep. A module
// built into the kernel (modules.builtin) needs no file.
func GuestModules(t testing.TB, dir string, names ...string) []string {
	t.Helper()
	deps := map[string][]string{} // module name -> its file, then its dependencies' files
	byName := map[string]string{}
	data, err := os.ReadFile(filepath.Join(dir, "modules.dep"))
	if err != nil {
		t.Fatal(err)
	}
	modName := func(path string) string {
		base := filepath.Base(path)
		base = base[:strings.Index(base, ".ko")]
		return strings.ReplaceAll(base, "-", "_")
	}
	for _, line := range strings.Split(string(data), "\n") {
		file, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		byName[modName(file)] = file
		deps[file] = strings.Fields(rest)
	}
	builtin, _ := os.ReadFile(filepath.Join(dir, "modules.builtin"))
	var out []string
	seen := map[string]bool{}
	var visit func(file string)
	visit = func(file string) {
		if seen[file] {
			return
		}
		seen[file] = true
		for _, d := range deps[file] {
			visit(d)
		}
		if !strings.HasSuffix(file, ".ko") {
			t.Skipf("SKIPPED: module %s is compressed; the guest loads uncompressed modules only", file)
		}
		out = append(out, filepath.Join(dir, file))
	}
	for _, n := range names {
		file, ok := byName[n]
		if !ok {
			if bytes.Contains(builtin, []byte("/"+n+".ko")) {
				continue
			}
			t.Skipf("SKIPPED: kernel module %s is neither in %s/modules.dep nor built in", n, dir)
		}
		visit(file)
	}
	return out
}

// BuildInitramfs packs a guest's init, the Go main package initPkg built
// here (static), and the modules as a newc cpio archive, the format the
// kernel unpacks.
func BuildInitramfs(t testing.TB, path, initPkg string, modules []string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "init")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := exec.Command(gobin, "build", "-o", bin, initPkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the guest's init: %v\n%s", err, out)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &cpioWriter{w: f}
	for _, d := range []string{"dev", "proc", "sys", "modules"} {
		w.add(t, d, unix.S_IFDIR|0o755, nil)
	}
	initData, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	w.add(t, "init", unix.S_IFREG|0o755, initData)
	for _, m := range modules {
		data, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		w.add(t, "modules/"+filepath.Base(m), unix.S_IFREG|0o644, data)
	}
	w.add(t, "TRAILER!!!", 0, nil)
}

// cpioWriter writes the "newc" format: a 110-byte ASCII header per file,
// the name with its NUL, the data, each padded to 4 bytes.
type cpioWriter struct {
	w   io.Writer
	ino int
}

func (c *cpioWriter) add(t testing.TB, name string, mode uint32, data []byte) {
	t.Helper()
	c.ino++
	nlink := 1
	if mode&unix.S_IFDIR != 0 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	var b bytes.Buffer
	b.WriteString(hdr)
	b.WriteString(name)
	b.WriteByte(0)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	b.Write(data)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	if _, err := c.w.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
}
