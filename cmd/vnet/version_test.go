package main

import (
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildVersion(t *testing.T) {
	stamped := func(version string, settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	const rev = "06d8d2d1a2b3c4d5e6f708192a3b4c5d6e7f8091"
	for _, tc := range []struct {
		name   string
		linked string
		info   *debug.BuildInfo
		want   string
	}{
		{"set at link time", "v0.3.0-4-g06d8d2d-dirty", stamped("v0.2.0", "vcs.revision", rev), "v0.3.0-4-g06d8d2d-dirty"},
		{"go install @version", "", stamped("v0.2.0", "vcs.revision", rev), "v0.2.0"},
		{"local build with VCS stamps", "", stamped("(devel)", "vcs.revision", rev, "vcs.modified", "false"), "06d8d2d1a2b3"},
		{"with uncommitted changes", "", stamped("(devel)", "vcs.revision", rev, "vcs.modified", "true"), "06d8d2d1a2b3-dirty"},
		{"nothing recorded", "", stamped("(devel)"), "unknown"},
		{"no build info", "", nil, "unknown"},
	} {
		if got := buildVersion(tc.linked, tc.info); got != tc.want {
			t.Errorf("%s: buildVersion = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// vnet --version and vnet version print one line: the version and the Go
// toolchain that built the binary.
func TestVersionCommands(t *testing.T) {
	want := regexp.MustCompile(`^vnet \S+ \(` + regexp.QuoteMeta(runtime.Version()) + ` ` + runtime.GOOS + `/` + runtime.GOARCH + `\)\n$`)
	var lines []string
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, code := run(t, t.TempDir(), args...)
		if code != 0 || !want.MatchString(out) {
			t.Errorf("vnet %s: exit %d, output %q; want %s", strings.Join(args, " "), code, out, want)
		}
		lines = append(lines, out)
	}
	if lines[0] != lines[1] {
		t.Errorf("--version says %q, version says %q", lines[0], lines[1])
	}
}
