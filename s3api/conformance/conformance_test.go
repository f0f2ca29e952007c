// Package conformance_test measures the S3 API's conformance the way the
// S3 ecosystem measures a server's: versitygw's public S3 test suite
// (`versitygw test full-flow`, from the versitygw binary make tools
// builds) runs twice side by side, straight against one versitygw and
// through the door in front of another, and the two results are
// compared test by test.
//
// The suite's clients hold no lock, so a relay in front of the door adds
// a fencing token to their writes as a fencing client would (relay_test.go).
// Every test the suite passes straight against versitygw must pass
// through the door, or be listed, with its reason, in the table of
// docs/s3-api.md's "Conformance" section; a listed test that passes
// through the door fails this test too, so the table stays true. A test
// that fails straight against versitygw in a run (a few of the suite's
// tests are flaky there) is not compared in that run.
package conformance_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"fencegate/edge"
	"fencegate/internal/devstack"
	"fencegate/internal/testenv"
	"fencegate/internal/testenv/s3door"
)

// The suite's credentials at the door: an identity with every grant on
// every S3 bucket, as the suite creates and deletes its own buckets.
const (
	doorAccessKey = "AKIAFENCEGATECONFORM"
	doorSecretKey = "conformance-secret-wJalrXUtnFEMI-K7MDENG"
	region        = "us-east-1"
)

// outcome is one test's result in one run.
type outcome struct {
	passed  bool
	message string // the failure's message
}

func TestConformance(t *testing.T) {
	bin, err := devstack.FindVersityGW()
	if err != nil {
		t.Fatal(err)
	}
	direct := testenv.StartS3(t)
	behind := testenv.StartS3(t)
	doorURL := startDoor(t, behind)
	rl, err := newRelay(doorURL, doorAccessKey, doorSecretKey, region)
	if err != nil {
		t.Fatal(err)
	}
	relaySrv := httptest.NewServer(rl)
	t.Cleanup(relaySrv.Close)

	var wg sync.WaitGroup
	var directRes, doorRes map[string]outcome
	var directOut, doorOut []byte
	wg.Add(2)
	go func() {
		defer wg.Done()
		directRes, directOut = runSuite(t, bin, direct.Endpoint(), direct.AccessKey, direct.SecretKey)
	}()
	go func() {
		defer wg.Done()
		doorRes, doorOut = runSuite(t, bin, relaySrv.URL, doorAccessKey, doorSecretKey)
	}()
	wg.Wait()
	for _, run := range []struct {
		name string
		out  []byte
	}{{"straight against versitygw", directOut}, {"through the door", doorOut}} {
		if i := bytes.Index(run.out, []byte("\npanic: ")); i >= 0 {
			t.Errorf("the suite crashed %s, in the test after its last result; the tests after it did not run:\n%s", run.name, tail(run.out[i:]))
		}
	}
	if len(directRes) < 100 || len(doorRes) < 100 {
		t.Fatalf("the suite ran %d tests straight, %d through the door; its output:\n%s\n---\n%s",
			len(directRes), len(doorRes), tail(directOut), tail(doorOut))
	}

	listed := listedDifferences(t)
	var passDirect, passDoor, regressions, timeouts []string
	for name, d := range directRes {
		if !d.passed {
			continue
		}
		passDirect = append(passDirect, name)
		g, ran := doorRes[name]
		switch {
		case ran && g.passed:
			passDoor = append(passDoor, name)
			if _, ok := listed[name]; ok {
				t.Errorf("%s passes through the door but is listed as a difference: remove it from docs/s3-api.md", name)
			}
		case listed[name] == "" && timedOut(g.message):
			timeouts = append(timeouts, name)
		case listed[name] == "" && !ran:
			regressions = append(regressions, name+": did not run through the door")
		case listed[name] == "":
			regressions = append(regressions, fmt.Sprintf("%s: %s", name, g.message))
		}
	}
	for name := range listed {
		if _, ok := directRes[name]; !ok {
			t.Errorf("%s is listed as a difference but is not a test of the suite", name)
		}
	}
	// The suite gives each request a few seconds, and a few of its tests
	// cancel a request's context before they read its answer; through the
	// relay and the door (etcd, then versitygw) on a loaded machine, the
	// answer can come after either. A few such failures are noted, not
	// counted; more is a failure of this test.
	sort.Strings(timeouts)
	if len(timeouts) > maxTimeouts {
		t.Errorf("%d tests timed out through the door (at most %d may): %v", len(timeouts), maxTimeouts, timeouts)
	} else if len(timeouts) > 0 {
		t.Logf("timed out through the door, not counted: %v", timeouts)
	}
	sort.Strings(regressions)
	for _, r := range regressions {
		t.Errorf("not listed in docs/s3-api.md, fails through the door: %s", r)
	}
	t.Logf("conformance: versitygw passes %d of %d tests; the door passes %d of those (%.1f%%); %d differ, %d listed; relay signed %d writes again with a token, forwarded %d as sent",
		len(passDirect), len(directRes), len(passDoor), 100*float64(len(passDoor))/float64(len(passDirect)),
		len(passDirect)-len(passDoor), len(listed), rl.resigned.Load(), rl.forwarded.Load())
}

// maxTimeouts is how many tests may time out through the door.
const maxTimeouts = 5

// timedOut reports whether a failure's message is the suite's own
// context ending (its time-out, or its own cancel) rather than an answer
// of the door.
func timedOut(message string) bool {
	return strings.Contains(message, "context canceled") || strings.Contains(message, "context deadline exceeded")
}

// startDoor serves the S3 API, as fencegate serve wires it (s3door), on
// real etcd and the versitygw s, and returns its URL.
func startDoor(t *testing.T, s *testenv.S3) *url.URL {
	t.Helper()
	door := s3door.New(t, s, edge.Auth{Identities: []edge.Identity{{
		Name:   "conformance",
		Grants: []edge.Grant{{Prefix: "s3/", Operations: []edge.Operation{edge.OpAdmin}}},
		S3Keys: []edge.S3Key{{AccessKeyID: doorAccessKey, SecretAccessKey: doorSecretKey}},
	}}})
	srv := httptest.NewServer(door.Handler)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// line is one result line of the suite: PASS, FAIL or SKIP, the test's
// name, and for a failure its message.
var line = regexp.MustCompile(`^(PASS|FAIL|SKIP) +([A-Za-z0-9_]+)(?:: (.*))?$`)

// ansi matches the colour codes around the suite's result words.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// runSuite runs the full-flow suite against endpoint and returns each
// test's outcome and the suite's output. The suite runs in an empty
// directory with no AWS_* variables: a test that shells out to
// ./versitygw (IAM administration) fails the same way in both runs, and
// no CA bundle of this machine changes the suite's HTTP client.
func runSuite(t *testing.T, bin, endpoint, access, secret string) (map[string]outcome, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "test", "--access", access, "--secret", secret, "--endpoint", endpoint, "full-flow")
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, _ := cmd.CombinedOutput() // the suite exits 1 when any test fails
	res := map[string]outcome{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := line.FindStringSubmatch(ansi.ReplaceAllString(sc.Text(), ""))
		if m == nil || m[1] == "SKIP" {
			continue
		}
		res[m[2]] = outcome{passed: m[1] == "PASS", message: m[3]}
	}
	return res, out
}

// listedDifferences reads the table of docs/s3-api.md's "Conformance"
// section: each row names a reason and the tests it explains.
func listedDifferences(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/s3-api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Conformance\n")
	if !ok {
		t.Fatal(`docs/s3-api.md has no "## Conformance" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	listed := map[string]string{}
	for _, row := range strings.Split(section, "\n") {
		cells := strings.Split(row, "|")
		if len(cells) != 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "-") || strings.TrimSpace(cells[1]) == "Tests" {
			continue
		}
		reason := strings.TrimSpace(cells[2])
		for _, name := range strings.Split(cells[1], ",") {
			name = strings.Trim(strings.TrimSpace(name), "`")
			if name == "" {
				continue
			}
			if _, dup := listed[name]; dup {
				t.Errorf("docs/s3-api.md lists %s twice", name)
			}
			listed[name] = reason
		}
	}
	return listed
}

// tail is the end of a run's output, for a failure message.
func tail(out []byte) string {
	if len(out) > 4000 {
		out = out[len(out)-4000:]
	}
	return string(out)
}
