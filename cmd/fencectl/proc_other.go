//go:build !linux

package main

import (
	"os/exec"
	"syscall"
)

// isolate does nothing outside Linux: the command stays in fencectl's
// process group.
func isolate(cmd *exec.Cmd) {}

// signalGroup sends sig to the command only.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}
