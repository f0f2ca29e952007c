// Package deptest enforces the project's dependency direction (see
// docs/architecture.md) as rules that fail the build, each with
// the reason it exists: api depends on nothing, the gateway reaches the
// token store and the backends only through its own interfaces, backends
// know nothing of etcd or HTTP routing, and what runs in production never
// links the local stack or the test helpers.
package deptest

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// rules lists, per package pattern, the import paths (and their
// subpackages) it must not have among its non-test dependencies: direct
// and indirect ones, or with direct set, its own imports only. Packages
// the pattern matches that except names are left out. why says what
// breaks if the rule does.
var rules = []struct {
	pkg        string
	forbidden  []string
	direct     bool
	stdlibOnly bool
	except     []string
	why        string
}{
	{
		pkg: "fencegate/api/...", stdlibOnly: true,
		why: "api is the wire contract that clients, the gateway and the stores share; a client that imports it must not pull in etcd, S3 or a router",
	},
	{
		pkg: "fencegate/internal/sigv4core", stdlibOnly: true,
		why: "the S3 backend signs and the S3 API verifies with the same SigV4 pieces; the package they share must bring neither one's dependencies to the other",
	},
	{
		pkg: "fencegate/tokenstore", forbidden: []string{"fencegate/gateway", "fencegate/backends", "github.com/go-chi", "github.com/aws"},
		why: "the token store is the etcd side of the fence: it decides on keys and revisions, and must not depend on the HTTP layer or on the object store it fences",
	},
	{
		pkg: "fencegate/tokenstore", forbidden: []string{"net/http"}, direct: true,
		why: "the store's answers are api errors, which package api maps to HTTP statuses in one table; a store that spoke HTTP would make a second table",
	},
	{
		pkg: "fencegate/backends/...", forbidden: []string{"go.etcd.io", "github.com/go-chi", "fencegate/gateway", "fencegate/tokenstore"},
		why: "a backend maps one upstream's failures to api error classes and nothing else; the fence check is the gateway's to order, never the backend's",
	},
	{
		pkg: "fencegate/fence", forbidden: []string{"github.com/go-chi", "fencegate/gateway", "fencegate/s3api", "fencegate/tokenstore", "fencegate/backends", "go.etcd.io", "github.com/aws", "cloud.google.com"},
		why: "the engine holds the fencing protocol and its ordering argument for every front door; it reaches its stores through the interfaces it declares, " +
			"so that no door, router or store type can change the order it proves (the gateway imports it, never the other way)",
	},
	{
		pkg: "fencegate/fence", forbidden: []string{"net/http"},
		why: "the engine speaks api's vocabulary (paths, tokens, requests, results, error classes) and knows nothing of HTTP, nor does anything it imports; " +
			"a door maps its errors to its own dialect (the REST API through api's one status table), so a new door needs no change to the engine",
	},
	{
		pkg: "fencegate/api", forbidden: []string{"net/http"},
		why: "package api (not its client, api/client) is the engine's vocabulary as well as the wire contract: the engine imports it, and must not reach net/http through it",
	},
	{
		pkg: "fencegate/edge", forbidden: []string{"fencegate/gateway", "fencegate/s3api", "fencegate/tokenstore", "fencegate/backends", "go.etcd.io", "github.com/aws", "cloud.google.com"},
		why: "the edge is what every door does to an HTTP request whatever its dialect (identity, limits, logs, metrics, traces, the event feed): " +
			"a door builds on it, never the other way, and it reaches the stores only through the engine's interfaces, which it decorates",
	},
	{
		pkg: "fencegate/s3api/...", forbidden: []string{"fencegate/gateway", "fencegate/rest", "fencegate/partners"},
		why: "no door imports another door, nor the composition root: the S3 API runs on the edge and the engine, as the REST API does, so that a change to one door's dialect cannot change another's answers",
	},
	{
		pkg: "fencegate/rest", forbidden: []string{"fencegate/gateway", "fencegate/s3api", "fencegate/partners"},
		why: "no door imports another door, nor the composition root: the REST API mounts the partner routes as a route group it is given (rest.WithRoutes), never by name",
	},
	{
		pkg: "fencegate/partners", forbidden: []string{"fencegate/gateway", "fencegate/s3api", "fencegate/rest"},
		why: "no door imports another door, nor the composition root: the partner routes run on the edge and the engine's body budget, whatever router mounts them",
	},
	{
		pkg: "fencegate/gateway", forbidden: []string{"fencegate/tokenstore", "fencegate/backends", "go.etcd.io", "github.com/aws", "cloud.google.com"},
		why: whyStoresThroughInterfaces,
	},
	{
		pkg: "fencegate/rest", forbidden: []string{"fencegate/tokenstore", "fencegate/backends", "go.etcd.io", "github.com/aws", "cloud.google.com"},
		why: whyStoresThroughInterfaces,
	},
	{
		pkg: "fencegate/partners", forbidden: []string{"fencegate/tokenstore", "fencegate/backends", "go.etcd.io", "github.com/aws", "cloud.google.com"},
		why: whyStoresThroughInterfaces,
	},
	{
		pkg: "fencegate/...", forbidden: []string{"fencegate/internal/devstack", "fencegate/internal/testenv"},
		except: []string{
			"fencegate/internal/devstack",       // itself
			"fencegate/internal/testenv",        // the test harness, built on devstack
			"fencegate/internal/testenv/s3door", // the S3 API's door for tests, on testenv
			"fencegate/internal/robustness",     // a test suite: its package runs only under go test
			"fencegate/cmd/fencebench",          // a benchmark that starts its own local stack
			"fencegate/cmd/fencegate",           // see devCommandFiles: only `fencegate dev` may
		},
		why: "devstack starts an embedded etcd and a versitygw child process with fixed credentials for a laptop, and testenv is test scaffolding: " +
			"neither may be linked into what serves production traffic, where a helper reached by mistake would run or weaken the real thing",
	},
	{
		pkg: "fencegate/...", forbidden: []string{"fencegate/internal/config"}, direct: true,
		except: []string{"fencegate/cmd/fencegate"},
		why: "flags, FENCEGATE_* variables and the config file are read in one place, for one binary; a package that imported its decoder would " +
			"take settings behind its caller's back instead of a validated Config passed to New",
	},
	{
		pkg: "fencegate/s3api/...", forbidden: []string{"fencegate/tokenstore", "fencegate/backends", "go.etcd.io", "github.com/aws/aws-sdk-go-v2/service", "cloud.google.com"},
		why: "the S3 API translates S3 requests onto the engine's fenced operations; if it reached etcd or a store itself it could write without the fence check, " +
			"or in another order than the one the gateway's argument proves",
	},
	{
		pkg: "fencegate/events", forbidden: []string{"fencegate/gateway", "fencegate/tokenstore", "fencegate/backends", "go.etcd.io"},
		why: "the event hub only carries decisions: publishing must never wait or fail, so it knows nothing of the stores, and the gateway that publishes cannot be reached back",
	},
	{
		pkg: "fencegate/console", forbidden: []string{"fencegate/gateway", "fencegate/tokenstore", "fencegate/backends", "fencegate/events"},
		why: "the console is static files: every datum it shows comes from the authenticated API, as for any client, so it must not reach data behind the API's checks",
	},
	{
		pkg: "fencegate/retention", forbidden: []string{"fencegate/gateway", "fencegate/tokenstore", "fencegate/backends", "go.etcd.io", "github.com/aws", "cloud.google.com"},
		why: "retention owns the rule of which marks may go; it reaches marks and objects through the interfaces it declares, so the rule is tested against any store and no store decides it",
	},
}

// sourceClients lets each token-source adapter under
// api/client/tokensource import its own service's client library (and its
// dependencies), and nothing else outside the standard library: the rest
// of api keeps to the standard library.
var sourceClients = map[string]string{
	"fencegate/api/client/tokensource/zookeeper": "github.com/go-zookeeper/zk",
}

// devCommandFiles are the non-test files of cmd/fencegate that may import
// internal/devstack: `fencegate dev` runs the local stack, and is the
// only command that does. Every other file, serve's among them, must not,
// and no file of it may import internal/testenv.
var devCommandFiles = []string{"dev.go"}

type goPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// whyStoresThroughInterfaces is why the composition root and the doors
// import no store.
const whyStoresThroughInterfaces = "the gateway and its doors reach the stores through the small interfaces they and the engine declare (FenceStore, ObjectStore, LockService, PartnerStore, ...), " +
	"so that the ordering argument can be tested against any store, and no store's type leaks into the handlers"

// list runs go list for pattern.
func list(t *testing.T, pattern string) []goPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Dir,GoFiles,Imports,Deps", pattern).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestImportRules(t *testing.T) {
	for _, rule := range rules {
		t.Run(rule.pkg, func(t *testing.T) {
			for _, p := range list(t, rule.pkg) {
				if slices.Contains(rule.except, p.ImportPath) {
					continue
				}
				deps := p.Deps
				if rule.direct {
					deps = p.Imports
				}
				for _, dep := range deps {
					client, hasClient := sourceClients[p.ImportPath]
					ownClient := hasClient && (dep == client || strings.HasPrefix(dep, client+"/"))
					if rule.stdlibOnly && !isStdlib(dep) && !strings.HasPrefix(dep, "fencegate/api") && !ownClient {
						t.Errorf("%s imports %s; it may import only the standard library: %s", p.ImportPath, dep, rule.why)
					}
					for _, f := range rule.forbidden {
						if dep == f || strings.HasPrefix(dep, f+"/") {
							t.Errorf("%s imports %s, which it must not (%s): %s", p.ImportPath, dep, f, rule.why)
						}
					}
				}
			}
		})
	}
}

// TestOnlyTheDevCommandImportsDevstack applies the devstack and testenv
// rule to the files of cmd/fencegate, whose package holds both serve and
// dev: only devCommandFiles may import devstack, and none testenv.
// Serve's files import the packages that the rule above keeps clean.
func TestOnlyTheDevCommandImportsDevstack(t *testing.T) {
	pkgs := list(t, "fencegate/cmd/fencegate")
	if len(pkgs) != 1 {
		t.Fatalf("go list fencegate/cmd/fencegate: %d packages", len(pkgs))
	}
	p := pkgs[0]
	importers := 0
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range f.Imports {
			path, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case path == "fencegate/internal/testenv":
				t.Errorf("cmd/fencegate/%s imports %s: test scaffolding in the production binary", name, path)
			case path == "fencegate/internal/devstack" && !slices.Contains(devCommandFiles, name):
				t.Errorf("cmd/fencegate/%s imports %s; only %v (fencegate dev) may: serve must not link the local stack", name, path, devCommandFiles)
			case path == "fencegate/internal/devstack":
				importers++
			}
		}
	}
	if importers == 0 {
		t.Errorf("no file of %v imports internal/devstack: the rule is out of date", devCommandFiles)
	}
}

// isStdlib reports whether an import path is in the standard library: its
// first element has no dot.
func isStdlib(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && first != "fencegate"
}
