//go:build !linux

package testenv

import "os/exec"

// isolate does nothing outside Linux: the child stays in the test's
// process group.
func isolate(cmd *exec.Cmd) {}

// kill kills the child.
func kill(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
