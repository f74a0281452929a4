package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set when building:
//
//	go build -ldflags "-X main.version=$(git describe --always --dirty)" ./cmd/vnet
//
// as make build does. A build without it (go install, go build) reports
// what the Go toolchain recorded instead.
var version string

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print vnet's version and the Go version it was built with",
		Args:  exactArgs(0, "no arguments"),
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
		},
	}
}

// versionLine is what vnet version and vnet --version print.
func versionLine() string {
	info, _ := debug.ReadBuildInfo()
	return fmt.Sprintf("vnet %s (%s %s/%s)", buildVersion(version, info), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// buildVersion prefers the version given at link time, then the module
// version (go install ...@v1.2.0), then the VCS revision the toolchain
// stamped, and says "unknown" when the build recorded none of them.
func buildVersion(linked string, info *debug.BuildInfo) string {
	if linked != "" {
		return linked
	}
	if info == nil {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "unknown"
	}
	return rev[:min(len(rev), 12)] + dirty
}
