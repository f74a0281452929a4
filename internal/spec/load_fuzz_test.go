package spec_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
)

// loadBound is how long one load (and, for a valid spec, its plan) may take.
// A fuzzed input takes milliseconds, one that stands for as many values as
// a spec may hold (spec.MaxValues) about a second; the bound leaves room
// for a loaded host.
const loadBound = 5 * time.Second

// FuzzLoad feeds arbitrary bytes to Load: it must return an error or a
// valid spec, never panic or take long, and a valid spec must model, plan
// and print as apply --dry-run does. An error shows no control character;
// yaml.v3's parser alone makes the same spec, or the same error.
//
//	go test -run='^$' -fuzz=FuzzLoad -fuzztime=30s ./internal/spec
func FuzzLoad(f *testing.F) {
	for _, pattern := range []string{"../../examples/*.yaml", "testdata/bad/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		if len(files) == 0 {
			f.Fatalf("no seeds in %s", pattern)
		}
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		start := time.Now()
		doc, err := spec.Load("fuzz.yaml", src)
		var slow *spec.Document
		var slowErr error
		spec.WithoutFastYAML(func() { slow, slowErr = spec.Load("fuzz.yaml", src) })
		if fmt.Sprint(err) != fmt.Sprint(slowErr) || err == nil && !reflect.DeepEqual(doc.Spec, slow.Spec) {
			t.Fatalf("the parsers disagree: fast %v, yaml.v3 %v", err, slowErr)
		}
		if err != nil {
			if bad := controlCharacters.FindString(err.Error()); bad != "" {
				t.Errorf("the error shows %q: %q", bad, err)
			}
		} else {
			// The cache gives the same spec, from memory and copied anew.
			cache := speccache.New("")
			for i := 0; i < 2; i++ {
				cached, err := cache.Load("fuzz.yaml", src)
				if err != nil || !reflect.DeepEqual(cached.Spec, doc.Spec) {
					t.Fatalf("the cache's load %d differs from Load's (%v)", i, err)
				}
			}
			desired := plan.Model(doc.Spec, plan.Options{NumCPU: 4, Now: time.Unix(0, 0)})
			_ = plan.Diff(desired, nil).String()
			if p := plan.Diff(desired, desired); !p.Empty() {
				t.Errorf("a model differs from itself:\n%s", p)
			}
			plan.HostTeams(doc.Spec)
			plan.TeamLimits(plan.IOCUplinks(doc.Spec), doc.Spec)
		}
		if took := time.Since(start); took > loadBound {
			t.Errorf("took %v for %d bytes", took, len(src))
		}
	})
}
