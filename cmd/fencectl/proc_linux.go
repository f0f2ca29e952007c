package main

import (
	"os/exec"
	"syscall"
)

// isolate puts the command in a process group of its own, so that
// signalGroup reaches everything it starts (a shell's children too), and
// has the kernel send it SIGTERM if fencectl dies without stopping it.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// signalGroup sends sig to the process group of a command started with
// isolate.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
