//go:build !linux

package main

import (
	"errors"
	"os/exec"
	"time"
)

// errNoProc says that per-process CPU and memory figures need Linux's
// /proc; elsewhere the report shows them as missing.
var errNoProc = errors.New("process figures need Linux /proc")

func processCPU(pid int) (time.Duration, error)      { return 0, errNoProc }
func selfCPU() (time.Duration, error)                { return 0, errNoProc }
func memoryKiB(pid int) (rss, peak int64, err error) { return 0, 0, errNoProc }
func resetPeakRSS(pid int) error                     { return errNoProc }
func childPID(name string) int                       { return 0 }
func sendBufferMax() (int64, error)                  { return 0, errNoProc }
func machineBusy() (time.Duration, error)            { return 0, errNoProc }
func isolate(cmd *exec.Cmd)                          {}
func terminate(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
