package testenv

import (
	"os/exec"
	"syscall"
)

// isolate puts the child in its own process group, so that [kill] reaches
// anything it starts, and has the kernel kill it if the test binary dies
// without running its cleanups (a test timeout, for example).
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// kill sends SIGKILL to the process group of a child started with
// [isolate].
func kill(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}
