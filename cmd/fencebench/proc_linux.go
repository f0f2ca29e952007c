package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times. It is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// processCPU returns the CPU time (user and system, all threads) that
// process pid has used so far, from /proc/<pid>/stat, with a resolution of
// 10 ms.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields are
	// counted after its closing parenthesis. utime and stime are fields
	// 14 and 15 of the line, 12 and 13 after the name.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// sendBufferMax returns the size up to which the kernel grows a TCP
// socket's send buffer by itself (the last figure of
// /proc/sys/net/ipv4/tcp_wmem): how much of an answer a server can write
// and be done with while its client reads nothing.
func sendBufferMax() (int64, error) {
	const path = "/proc/sys/net/ipv4/tcp_wmem"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(b))
	if len(fields) != 3 {
		return 0, fmt.Errorf("%s: %q, want three sizes", path, b)
	}
	n, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: %q, want three sizes", path, b)
	}
	return n, nil
}

// selfCPU returns the CPU time this process has used so far, with
// microsecond resolution.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// memoryKiB returns process pid's resident set size now (VmRSS) and its
// peak since start or since [resetPeakRSS] (VmHWM), in KiB.
func memoryKiB(pid int) (rss, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || name != "VmRSS" && name != "VmHWM" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, name, err)
		}
		if name == "VmRSS" {
			rss = n
		} else {
			peak = n
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return rss, peak, nil
}

// resetPeakRSS sets process pid's VmHWM back to its current RSS (Linux
// 4.0 and later), so that the next peak measures what follows.
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// childPID returns the pid of a child of this process whose command name
// is name, or 0. devstack starts versitygw without telling its pid.
func childPID(name string) int {
	self := strconv.Itoa(os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(string(b[end+1:]))
		if string(b[open+1:end]) == name && len(fields) > 1 && fields[1] == self {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:open])))
			return pid
		}
	}
	return 0
}

// isolate runs a child in its own process group and has the kernel kill
// it if this process dies first, so that no server outlives a killed
// benchmark.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// terminate sends SIGTERM to a child started with [isolate].
func terminate(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
}

// machineBusy returns the CPU time all CPUs have spent not idle (nor
// waiting for I/O, nor stolen by the hypervisor) since boot, from
// /proc/stat.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for i, f := range fields[1:9] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		switch i {
		case 3, 4, 7: // idle, iowait, steal
		default:
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / clockTicks, nil
}
