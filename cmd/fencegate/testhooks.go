package main

// The gateway's test-only switches (gateway.TestHooks) change its
// protocol on purpose (fence before observe, unconditional writes and
// tickets, a pause after the fence check), so that the fault-injection suite in
// internal/robustness can show that its checker catches what they break.
// They exist only in binaries built with the build tag below
// (testhooks_unsafe.go); a normal build has no code that sets them
// (testhooks_release.go), so that no environment can make a release
// binary unsafe. There, setting the variable makes serve and dev refuse to
// start rather than ignore it: a suite that asked for hooks must not go on
// believing it has them, and an operator who set it learns that it does
// nothing.

// unsafeHooksBuildTag is the build tag that compiles the unsafe test
// hooks in: go build -tags fencegate_unsafe_hooks.
const unsafeHooksBuildTag = "fencegate_unsafe_hooks"

// unsafeTestHooksEnv names the environment variable that turns on the
// gateway's test-only switches (gateway.TestHooks) in a binary built with
// -tags fencegate_unsafe_hooks, for the fault-injection suite in
// internal/robustness, which runs the real binary as a child process.
// Unset or empty, the default, means none: the production protocol. A
// normal build refuses to start when it is set. It is not a flag, so that it never shows in
// `fencegate -h` as if it were a setting.
//
// Its value is a comma-separated list of:
//
//	swap-order                 fence check before observe (wrong on purpose)
//	unconditional-write        PUT without If-Match (wrong on purpose)
//	unconditional-ticket       tickets that sign no If-Match or
//	                           If-None-Match (wrong on purpose)
//	pause-after-fence=HOST:PORT  after each accepted fence check, ask the
//	                           controller at HOST:PORT (loopback only)
//	                           whether to wait, and wait until it answers
const unsafeTestHooksEnv = "FENCEGATE_UNSAFE_TEST_HOOKS"
