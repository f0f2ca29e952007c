//go:build !fencegate_unsafe_hooks

package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestReleaseBuildRefusesUnsafeTestHooks: in a normal build,
// FENCEGATE_UNSAFE_TEST_HOOKS set to anything makes serve and dev refuse
// their configuration (exit 2) and unsafeTestHooks return no hooks and an
// error; unset or blank, nothing changes.
func TestReleaseBuildRefusesUnsafeTestHooks(t *testing.T) {
	const want = "built without the unsafe test hooks"
	for _, value := range []string{"swap-order", "unconditional-write", "pause-after-fence=127.0.0.1:9", "anything"} {
		env := envMap(map[string]string{unsafeTestHooksEnv: value})
		hooks, err := unsafeTestHooks(env, nil)
		if hooks != nil || !errors.As(err, new(*usageError)) || !strings.Contains(err.Error(), want) {
			t.Errorf("unsafeTestHooks(%s=%q) = %+v, %v; want no hooks and a usage error saying %q", unsafeTestHooksEnv, value, hooks, err, want)
		}
		if _, err := parseServe([]string{"--etcd-endpoints", "http://127.0.0.1:2379"}, env, &bytes.Buffer{}); !errors.As(err, new(*usageError)) || !strings.Contains(err.Error(), want) {
			t.Errorf("parseServe with %s=%q = %v; want a usage error saying %q", unsafeTestHooksEnv, value, err, want)
		}
		if _, err := parseDev(nil, env, &bytes.Buffer{}); !errors.As(err, new(*usageError)) || !strings.Contains(err.Error(), want) {
			t.Errorf("parseDev with %s=%q = %v; want a usage error saying %q", unsafeTestHooksEnv, value, err, want)
		}
	}
	for _, env := range []map[string]string{nil, {unsafeTestHooksEnv: ""}, {unsafeTestHooksEnv: "  "}} {
		if hooks, err := unsafeTestHooks(envMap(env), nil); hooks != nil || err != nil {
			t.Errorf("unsafeTestHooks(%v) = %+v, %v; want nil, nil", env, hooks, err)
		}
		if _, err := parseServe([]string{"--etcd-endpoints", "http://127.0.0.1:2379"}, envMap(env), &bytes.Buffer{}); err != nil {
			t.Errorf("parseServe with %v = %v; want ok", env, err)
		}
	}
}
