package devstack

import (
	"os/exec"
	"syscall"
)

// isolate puts the child in its own process group, so that signals reach
// anything it starts, and has the kernel kill it if this process dies
// without closing it.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to the process group of a child started with
// [isolate], and to the child itself.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	_ = cmd.Process.Signal(sig)
}
