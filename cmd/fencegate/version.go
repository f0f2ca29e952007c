package main

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
)

// runVersion is `fencegate version`: the module version, the Go version
// and the VCS revision the binary was built from, when known.
func runVersion(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return usageErrorf("version: unexpected argument %q", args[0])
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return errors.New("version: no build information in this binary")
	}
	fmt.Fprintf(stdout, "fencegate %s\n", buildVersion())
	fmt.Fprintf(stdout, "  go: %s\n", info.GoVersion)
	fmt.Fprintf(stdout, "  module: %s\n", info.Main.Path)
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision", "vcs.time", "vcs.modified", "GOOS", "GOARCH", "-race":
			fmt.Fprintf(stdout, "  %s: %s\n", s.Key, s.Value)
		}
	}
	return nil
}

// buildVersion is the module version the binary was built as, "(devel)"
// when unknown: the first line of `fencegate version`, and the
// service.version of its traces.
func buildVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}
