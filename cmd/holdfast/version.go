package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// versionCommand prints holdfast's version: the module version the binary was
// built from (`go install …/cmd/holdfast@v1.2.3` gives "v1.2.3"), or for a
// build in a checkout "(devel)" and the commit, with "+modified" when the tree
// had changes; then the Go release that built it.
func versionCommand(w io.Writer) int {
	fmt.Fprintln(w, versionLine(debug.ReadBuildInfo()))
	return exitOK
}

// versionLine formats what the build info says.
func versionLine(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "holdfast (unknown version: no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if v == "(devel)" && rev != "" {
		v += " " + rev[:min(len(rev), 12)] + modified
	}
	return fmt.Sprintf("holdfast %s %s", v, bi.GoVersion)
}
