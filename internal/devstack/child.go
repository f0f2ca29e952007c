package devstack

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// child is a server that devstack runs as a child process (versitygw,
// fake-gcs-server): its command, the tail of its output, and exited,
// closed once the process has been reaped. The servers embed it.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd.Wait returns
	output *tailBuffer   // the child's stdout and stderr

	stopOnce sync.Once
}

// newChild returns a child with no process yet.
func newChild() child {
	return child{exited: make(chan struct{}), output: &tailBuffer{limit: outputLimit}}
}

// run starts cmd in its own process group (see isolate), its output into
// the tail.
func (c *child) run(cmd *exec.Cmd) error {
	cmd.Stdout = c.output
	cmd.Stderr = c.output
	cmd.WaitDelay = time.Second
	isolate(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", cmd.Path, err)
	}
	c.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(c.exited)
	}()
	return nil
}

// waitHealthy polls url, the health endpoint of the server name on addr,
// every 50 ms until it answers 200 OK; it fails when the child exits,
// after timeout, or when ctx ends, with the child's output.
func (c *child) waitHealthy(ctx context.Context, name, addr, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-c.exited:
			return fmt.Errorf("%s on %s exited before it was healthy (%v); output:\n%s",
				name, addr, c.cmd.ProcessState, c.output.String())
		case <-deadline.C:
			return fmt.Errorf("%s on %s not healthy after %v (last: %s); output:\n%s",
				name, addr, timeout, last, c.output.String())
		case <-ctx.Done():
			return fmt.Errorf("%s on %s: %w", name, addr, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// stop stops the child's process group: SIGTERM, then SIGKILL if it has
// not exited within grace. It waits until the child is reaped. Stopping
// twice, or a child never run, does nothing.
func (c *child) stop(grace time.Duration) {
	c.stopOnce.Do(func() {
		if c.cmd == nil {
			return
		}
		signalGroup(c.cmd, syscall.SIGTERM)
		select {
		case <-c.exited:
			return
		case <-time.After(grace):
		}
		signalGroup(c.cmd, syscall.SIGKILL)
		<-c.exited
	})
}

// Exited is closed when the child process has exited, whether by Close or
// on its own.
func (c *child) Exited() <-chan struct{} { return c.exited }

// Output returns the last 64 KiB of the child's stdout and stderr.
func (c *child) Output() string { return c.output.String() }
