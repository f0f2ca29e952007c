//go:build fencegate_unsafe_hooks

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"fencegate/api"
)

func TestUnsafeTestHooksAreOffByDefault(t *testing.T) {
	for _, env := range []map[string]string{
		nil,
		{unsafeTestHooksEnv: ""},
		{unsafeTestHooksEnv: "  "},
		// Variables that look alike are not it.
		{"FENCEGATE_UNSAFE_TEST_HOOK": "swap-order", "FENCEGATE_TEST_HOOKS": "swap-order"},
	} {
		var logs bytes.Buffer
		hooks, err := unsafeTestHooks(envMap(env), slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil || hooks != nil {
			t.Errorf("unsafeTestHooks(%v) = %+v, %v; want nil, nil", env, hooks, err)
		}
		if strings.Contains(logs.String(), "UNSAFE") {
			t.Errorf("unsafeTestHooks(%v) logged %q; want nothing", env, logs.String())
		}
	}
}

func TestUnsafeTestHooksAreLoggedLoudly(t *testing.T) {
	var logs bytes.Buffer
	env := envMap(map[string]string{unsafeTestHooksEnv: "swap-order,unconditional-write,unconditional-ticket,pause-after-fence=127.0.0.1:9"})
	hooks, err := unsafeTestHooks(env, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !hooks.UnsafeFenceBeforeObserve || !hooks.UnsafeUnconditionalWrite || !hooks.UnsafeUnconditionalTicket || hooks.AfterFenceCheck == nil || hooks.AfterObserve != nil {
		t.Errorf("hooks = %+v; want swap-order, unconditional writes and tickets, and a pause after the fence check", hooks)
	}
	if got := logs.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "UNSAFE TEST HOOKS ARE ON") {
		t.Errorf("log = %q; want an ERROR line saying UNSAFE TEST HOOKS ARE ON", got)
	}
}

func TestUnsafeTestHooksRejectsMistakes(t *testing.T) {
	for _, value := range []string{
		"swap_order",
		"swap-order,swap-order",
		"swap-order=1",
		"pause-after-fence",
		"pause-after-fence=",
		"pause-after-fence=10.0.0.1:80", // not loopback
		"pause-after-fence=localhost:80",
		"pause-after-fence=127.0.0.1:0",
		"pause-after-fence=127.0.0.1",
		"swap-order,,unconditional-write",
	} {
		_, err := unsafeTestHooks(envMap(map[string]string{unsafeTestHooksEnv: value}), slog.New(slog.DiscardHandler))
		var usage *usageError
		if !errors.As(err, &usage) {
			t.Errorf("unsafeTestHooks(%q) error = %v; want a usage error", value, err)
		}
	}
}

func TestParseUnsafeTestHooks(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  unsafeHookSpec
	}{
		{"swap-order", unsafeHookSpec{swapOrder: true}},
		{"unconditional-write", unsafeHookSpec{unconditionalWrite: true}},
		{"unconditional-ticket", unsafeHookSpec{unconditionalTicket: true}},
		{" pause-after-fence=127.0.0.1:7000 ", unsafeHookSpec{pauseAfterFence: "127.0.0.1:7000"}},
		{"pause-after-fence=[::1]:7000,swap-order", unsafeHookSpec{swapOrder: true, pauseAfterFence: "[::1]:7000"}},
	} {
		got, err := parseUnsafeTestHooks(tc.value)
		if err != nil || got != tc.want {
			t.Errorf("parseUnsafeTestHooks(%q) = %+v, %v; want %+v", tc.value, got, err, tc.want)
		}
	}
}

func FuzzParseUnsafeTestHooks(f *testing.F) {
	for _, seed := range []string{"swap-order", "unconditional-write,pause-after-fence=127.0.0.1:1", "pause-after-fence=[::1]:65535", ",", "x=y=z"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		spec, err := parseUnsafeTestHooks(value)
		if err != nil {
			return
		}
		if spec.pauseAfterFence != "" {
			host, _, err := net.SplitHostPort(spec.pauseAfterFence)
			if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
				t.Fatalf("parseUnsafeTestHooks(%q) accepted controller %q, not a loopback host:port", value, spec.pauseAfterFence)
			}
		}
		if !spec.swapOrder && !spec.unconditionalWrite && !spec.unconditionalTicket && spec.pauseAfterFence == "" {
			t.Fatalf("parseUnsafeTestHooks(%q) accepted a value that turns nothing on", value)
		}
	})
}

func TestPauseAfterFenceWaitsForTheController(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const hold = 200 * time.Millisecond
	lines := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		line, _ := bufio.NewReader(conn).ReadString('\n')
		lines <- line
		time.Sleep(hold)
		_, _ = conn.Write([]byte("go\n"))
	}()
	hook := pauseAfterFence(ln.Addr().String(), slog.New(slog.DiscardHandler))
	start := time.Now()
	hook(context.Background(), api.Resource("s3/b/k"), 42)
	if waited := time.Since(start); waited < hold {
		t.Errorf("hook returned after %v; want at least the controller's %v", waited, hold)
	}
	if got, want := <-lines, "after-fence 42 s3/b/k\n"; got != want {
		t.Errorf("controller read %q; want %q", got, want)
	}

	// A controller that cannot be reached pauses nothing, and a request
	// that ends stops the wait.
	_ = ln.Close()
	start = time.Now()
	hook(context.Background(), api.Resource("s3/b/k"), 43)
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("hook with no controller took %v", waited)
	}
}
