package spec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExamplesAreValid(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples found")
	}
	for _, f := range files {
		if _, err := LoadFile(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// Each file in testdata/bad starts with "# want: TEXT"; loading it must fail
// with an error containing TEXT.
func TestBadSpecs(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(files) < 20 {
		t.Fatalf("want at least 20 bad specs, have %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want := WantedError(src)
			if want == "" {
				t.Fatal("no '# want:' line")
			}
			_, err = Load(f, src)
			if err == nil {
				t.Fatalf("accepted; want error containing %q", want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error:\n%v\nwant it to contain %q", err, want)
			}
			if !strings.Contains(err.Error(), "(line ") {
				t.Errorf("error has no line: %v", err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	doc, err := LoadFile("../../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := doc.Spec
	if got := s.HostPortName(0); got != "vmk0" {
		t.Errorf("host port name = %q", got)
	}
	sw, ok := s.PortGroupSwitch("pg-private")
	if !ok || sw.Name != "private0" || len(sw.SwitchHosts()) != 1 {
		t.Errorf("pg-private switch = %+v", sw)
	}
	dvs, _ := s.PortGroupSwitch("pg-vm")
	if got := strings.Join(dvs.SwitchHosts(), ","); got != "esx1,esx2" {
		t.Errorf("dvs0 hosts = %s", got)
	}
	if p := doc.PosOf("vms[0].nics[1].ip"); p.Line == 0 {
		t.Errorf("no position for vms[0].nics[1].ip")
	}
}

func TestAllErrorsReported(t *testing.T) {
	src := []byte("name: x\nvms:\n  - {name: a, host: nope}\n  - {name: b, host: nope2}\n")
	_, err := Load("x", src)
	var es Errors
	if !errors.As(err, &es) || len(es) != 2 {
		t.Fatalf("want 2 errors, got %v", err)
	}
	if es[0].Pos.Line != 3 || es[1].Pos.Line != 4 {
		t.Errorf("errors not in file order: %v", es)
	}
}
