//go:build !linux

package devstack

import (
	"os"
	"os/exec"
	"syscall"
)

// isolate does nothing outside Linux: the child stays in this process's
// group.
func isolate(cmd *exec.Cmd) {}

// signalGroup sends sig to the child; SIGKILL kills it.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil {
		return
	}
	if sig == syscall.SIGKILL {
		_ = cmd.Process.Kill()
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
}
