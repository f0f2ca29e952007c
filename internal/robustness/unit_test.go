package robustness

import (
	"bufio"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"fencegate/api"
)

func TestParseLinkFault(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want LinkFault
	}{
		{"none", LinkFault{}},
		{"delay=100ms", LinkFault{Delay: 100 * time.Millisecond}},
		{"delay=100ms+-50ms", LinkFault{Delay: 100 * time.Millisecond, Jitter: 50 * time.Millisecond}},
		{"delay=100ms±50ms", LinkFault{Delay: 100 * time.Millisecond, Jitter: 50 * time.Millisecond}},
		{"blackhole=rx", LinkFault{BlackholeRx: true}},
		{"blackhole=both, from=member-1|member-2", LinkFault{BlackholeTx: true, BlackholeRx: true, From: []string{"member-1", "member-2"}}},
		{"drop", LinkFault{Drop: true}},
		{"reset,blackhole=tx", LinkFault{Reset: true, BlackholeTx: true}},
	} {
		got, err := ParseLinkFault(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseLinkFault(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "delay", "delay=0s", "delay=-1s", "delay=100ms+-200ms", "delay=9s+-2s", "delay=1h",
		"blackhole", "blackhole=up", "drop=1", "drop,drop", "from=", "from=a|a", "from=a b", "jitter=1ms", "none,drop"} {
		if got, err := ParseLinkFault(in); err == nil {
			t.Errorf("ParseLinkFault(%q) = %+v, nil; want an error", in, got)
		}
	}
}

func FuzzParseLinkFault(f *testing.F) {
	for _, s := range []string{"none", "delay=100ms+-50ms", "blackhole=both,from=member-1|member-3", "drop,reset", "delay=1.5s±1s,blackhole=tx"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fault, err := ParseLinkFault(s)
		if err != nil {
			return
		}
		if fault.Delay < 0 || fault.Jitter < 0 || fault.Jitter > fault.Delay || fault.Delay+fault.Jitter > maxDelay {
			t.Fatalf("ParseLinkFault(%q) = %+v: delay out of bounds", s, fault)
		}
		again, err := ParseLinkFault(fault.String())
		if err != nil || !reflect.DeepEqual(again, fault) {
			t.Fatalf("ParseLinkFault(%q).String() = %q reads back as %+v, %v", s, fault.String(), again, err)
		}
	})
}

func TestParseAfterFence(t *testing.T) {
	resource, token, ok := parseAfterFence("after-fence 42 s3/b/a key with spaces\n")
	if !ok || resource != "s3/b/a key with spaces" || token != 42 {
		t.Errorf("parseAfterFence = %q, %d, %t", resource, token, ok)
	}
	for _, line := range []string{"", "after-fence", "after-fence 42", "after-fence 0 s3/b/k", "after-fence -1 s3/b/k", "before-fence 1 s3/b/k"} {
		if _, _, ok := parseAfterFence(line); ok {
			t.Errorf("parseAfterFence(%q) accepted it", line)
		}
	}
}

func FuzzParseAfterFence(f *testing.F) {
	f.Add("after-fence 42 s3/b/k\n")
	f.Add("after-fence 9223372036854775807 s3/b/a/b/c")
	f.Fuzz(func(t *testing.T, line string) {
		resource, token, ok := parseAfterFence(line)
		if ok && (token == 0 || token > api.MaxToken || resource == "") {
			t.Fatalf("parseAfterFence(%q) = %q, %d", line, resource, token)
		}
	})
}

// echoServer echoes every connection until closed.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = io.Copy(conn, conn)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends line through conn and reads it back within timeout.
func roundTrip(conn net.Conn, line string, timeout time.Duration) (string, time.Duration, error) {
	start := time.Now()
	_ = conn.SetDeadline(start.Add(timeout))
	if _, err := conn.Write([]byte(line + "\n")); err != nil {
		return "", 0, err
	}
	got, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSuffix(got, "\n"), time.Since(start), err
}

func TestProxyFaults(t *testing.T) {
	proxy, err := NewProxy(ProxyConfig{Name: "test", Target: echoServer(t), Source: "gateway-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	dial := func() net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp", proxy.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}

	conn := dial()
	if got, _, err := roundTrip(conn, "hello", 2*time.Second); err != nil || got != "hello" {
		t.Fatalf("no fault: %q, %v", got, err)
	}
	proxy.SetFault(LinkFault{Delay: 100 * time.Millisecond, Jitter: 50 * time.Millisecond})
	if got, took, err := roundTrip(conn, "slow", 2*time.Second); err != nil || got != "slow" || took < 100*time.Millisecond {
		t.Errorf("delay: %q after %v, %v; want the echo after at least 2 x 50 ms", got, took, err)
	}
	proxy.SetFault(LinkFault{BlackholeRx: true})
	if got, _, err := roundTrip(conn, "lost", 300*time.Millisecond); err == nil {
		t.Errorf("blackhole=rx: got %q; want a timeout", got)
	}
	proxy.SetFault(LinkFault{BlackholeTx: true, From: []string{"gateway-2"}})
	if got, _, err := roundTrip(dial(), "other source", 2*time.Second); err != nil || got != "other source" {
		t.Errorf("fault from another source: %q, %v; want the echo", got, err)
	}
	proxy.SetFault(LinkFault{Drop: true})
	if got, _, err := roundTrip(dial(), "refused", 2*time.Second); err == nil {
		t.Errorf("drop: got %q; want the connection closed", got)
	}
	proxy.Heal()
	healed := dial()
	if got, _, err := roundTrip(healed, "again", 2*time.Second); err != nil || got != "again" {
		t.Fatalf("healed: %q, %v", got, err)
	}
	proxy.SetFault(LinkFault{Reset: true})
	if _, _, err := roundTrip(healed, "after reset", 2*time.Second); err == nil {
		t.Errorf("reset: the connection still works")
	}
	if f := proxy.Fault(); !f.IsZero() {
		t.Errorf("after a reset the fault in force is %v; want none (reset is one-shot)", f)
	}
}

func TestProxyTellsPeersApart(t *testing.T) {
	ids := map[string]string{"8e9e05c52164694d": "member-1", "91bc3c398fb3c146": "member-2"}
	proxy, err := NewProxy(ProxyConfig{Name: "peers", Target: echoServer(t), MemberOf: func(id string) string { return ids[id] }})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	request := func(from string) string {
		return "GET /raft/stream/message/x HTTP/1.1\r\nHost: x\r\nX-Server-From: " + from + "\r\n\r\n"
	}
	proxy.SetFault(LinkFault{BlackholeTx: true, BlackholeRx: true, From: []string{"member-1"}})
	for from, wantEcho := range map[string]bool{"8e9e05c52164694d": false, "91bc3c398fb3c146": true} {
		conn, err := net.Dial("tcp", proxy.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(500 * time.Millisecond))
		req := request(from)
		_, _ = conn.Write([]byte(req))
		buf := make([]byte, len(req))
		_, err = io.ReadFull(conn, buf)
		conn.Close()
		if echoed := err == nil && string(buf) == req; echoed != wantEcho {
			t.Errorf("connection from %s (%s): echoed %t; want %t", from, ids[from], echoed, wantEcho)
		}
	}
}

// op builds a porcupine operation of the register model.
func modelOp(client int, call, ret int64, in registerInput, out registerOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func TestRegisterModel(t *testing.T) {
	w := func(value string, token api.Token) registerInput {
		return registerInput{write: true, key: "k", token: token, value: value, etag: "e-" + value}
	}
	read := registerInput{key: "k"}
	ok := func(replaced string) registerOutput {
		return registerOutput{outcome: Acked, replacedKnown: true, created: replaced == "", replaced: replaced}
	}
	saw := func(value string, token api.Token) registerOutput {
		return registerOutput{exists: true, value: value, token: token}
	}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"tokens grow", []porcupine.Operation{
			modelOp(0, 0, 10, w("a", 5), ok("")),
			modelOp(1, 20, 30, w("b", 7), ok("e-a")),
			modelOp(0, 40, 50, read, saw("b", 7)),
		}, porcupine.Ok},
		{"an acked write with a smaller token after a larger one", []porcupine.Operation{
			modelOp(0, 0, 10, w("a", 7), ok("")),
			modelOp(1, 20, 30, w("b", 5), ok("e-a")),
		}, porcupine.Illegal},
		{"a stale writer that replaced the newer version, though concurrent", []porcupine.Operation{
			modelOp(0, 0, 100, w("stale", 5), ok("e-new")),
			modelOp(1, 20, 30, w("new", 7), ok("")),
		}, porcupine.Illegal},
		{"an ambiguous write that landed", []porcupine.Operation{
			modelOp(0, 0, ambiguousReturn, w("a", 5), registerOutput{outcome: Ambiguous}),
			modelOp(1, 20, 30, read, saw("a", 5)),
		}, porcupine.Ok},
		{"a refused write that landed", []porcupine.Operation{
			modelOp(0, 0, 10, w("a", 5), registerOutput{outcome: Refused}),
			modelOp(1, 20, 30, read, saw("a", 5)),
		}, porcupine.Illegal},
		{"a read of a lost acked write", []porcupine.Operation{
			modelOp(0, 0, 10, w("a", 5), ok("")),
			modelOp(1, 20, 30, read, registerOutput{}),
		}, porcupine.Illegal},
	} {
		if got := porcupine.CheckOperationsTimeout(registerModel, tc.ops, 10*time.Second); got != tc.want {
			t.Errorf("%s: %s; want %s", tc.name, got, tc.want)
		}
	}
}

func TestWriteOutcome(t *testing.T) {
	for _, tc := range []struct {
		status int
		typ    string
		want   Outcome
	}{
		{200, "", Acked},
		{201, "", Acked},
		{409, api.ProblemTypePrefix + "stale-token", RefusedStale},
		{409, api.ProblemTypePrefix + "concurrent-modification", Refused},
		{503, api.ProblemTypePrefix + "fence-unavailable", Refused},
		{502, api.ProblemTypePrefix + "upstream-error", Ambiguous},
		{504, api.ProblemTypePrefix + "upstream-timeout", Ambiguous},
		{500, api.ProblemTypePrefix + "internal", Ambiguous},
	} {
		if got := writeOutcome(tc.status, tc.typ); got != tc.want {
			t.Errorf("writeOutcome(%d, %q) = %s; want %s", tc.status, tc.typ, got, tc.want)
		}
	}
}
