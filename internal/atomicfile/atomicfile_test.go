package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// entries lists a directory's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteReplacesWholeOrNotAtAll(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name    string
		old     string // "" for no file before
		write   func(path string) error
		want    string
		wantErr bool
	}{
		{name: "new file", write: func(p string) error { return Write(p, []byte("new"), 0o640) }, want: "new"},
		{name: "replaces", old: "old", write: func(p string) error { return Write(p, []byte("new"), 0o640) }, want: "new"},
		{name: "unsynced, new file", write: func(p string) error { return Replace(p, []byte("new"), 0o640) }, want: "new"},
		{name: "unsynced, replaces", old: "old", write: func(p string) error { return Replace(p, []byte("new"), 0o640) }, want: "new"},
		{name: "unsynced, into no directory", wantErr: true,
			write: func(p string) error { return Replace(filepath.Join(p, "sub"), []byte("new"), 0o640) }},
		{name: "a writer that fails leaves the old", old: "old", wantErr: true, want: "old",
			write: func(p string) error {
				return WriteWith(p, 0o640, func(f *os.File) error { f.WriteString("half"); return boom })
			}},
		{name: "a writer that fails leaves none", wantErr: true,
			write: func(p string) error {
				return WriteWith(p, 0o640, func(f *os.File) error { return boom })
			}},
		{name: "aborted", old: "old", want: "old",
			write: func(p string) error {
				pf, err := Create(p, 0o640)
				if err != nil {
					return err
				}
				pf.File().WriteString("new")
				pf.Abort()
				return nil
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if c.old != "" {
				if err := os.WriteFile(path, []byte(c.old), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := c.write(path)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, c.wantErr)
			}
			got, rerr := os.ReadFile(path)
			switch {
			case c.want == "" && !errors.Is(rerr, os.ErrNotExist):
				t.Fatalf("file = %q, %v; want none", got, rerr)
			case c.want != "" && string(got) != c.want:
				t.Fatalf("file = %q, %v; want %q", got, rerr, c.want)
			}
			wantEntries := 1
			if c.want == "" {
				wantEntries = 0
			}
			if es := entries(t, dir); len(es) != wantEntries {
				t.Fatalf("directory holds %q: a temporary file was left", es)
			}
			if c.want != "" && !c.wantErr && c.old == "" {
				info, _ := os.Stat(path)
				if info.Mode().Perm() != 0o640 {
					t.Fatalf("mode %v, want 0640", info.Mode().Perm())
				}
			}
		})
	}
}

func TestWriteAll(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := WriteAll([]File{{Path: a, Data: []byte("1"), Perm: 0o600}, {Path: b, Data: []byte("2"), Perm: 0o600}}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{a: "1", b: "2"} {
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Fatalf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
	// A file whose directory is missing fails the call; none is left half
	// made, and no temporary file stays.
	err := WriteAll([]File{{Path: a, Data: []byte("3"), Perm: 0o600}, {Path: filepath.Join(dir, "no", "c"), Data: []byte("4")}})
	if err == nil {
		t.Fatal("a file in a missing directory was written")
	}
	if got, _ := os.ReadFile(a); string(got) != "1" {
		t.Fatalf("a = %q after a failed WriteAll, want the old 1", got)
	}
	if es := entries(t, dir); len(es) != 2 {
		t.Fatalf("directory holds %q", es)
	}
}
