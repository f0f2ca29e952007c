// Package deptest enforces the project's dependency direction (see the
// README's "Project structure"): api depends on nothing, the gateway
// reaches the token store and the backends only through its own
// interfaces, and backends know nothing of etcd or HTTP routing.
package deptest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// rules lists, per package pattern, the import paths (and their
// subpackages) it must not have among its non-test dependencies: direct
// and indirect ones, or with direct set, its own imports only.
var rules = []struct {
	pkg        string
	forbidden  []string
	direct     bool
	stdlibOnly bool
}{
	{pkg: "fencegate/api/...", stdlibOnly: true},
	{pkg: "fencegate/tokenstore", forbidden: []string{"fencegate/gateway", "fencegate/backends", "github.com/go-chi", "github.com/aws"}},
	{pkg: "fencegate/tokenstore", forbidden: []string{"net/http"}, direct: true},
	{pkg: "fencegate/backends/...", forbidden: []string{"go.etcd.io", "github.com/go-chi", "fencegate/gateway", "fencegate/tokenstore"}},
	{pkg: "fencegate/gateway", forbidden: []string{"fencegate/tokenstore", "fencegate/backends", "go.etcd.io", "github.com/aws", "cloud.google.com"}},
	{pkg: "fencegate/retention", forbidden: []string{"fencegate/gateway", "fencegate/tokenstore", "fencegate/backends", "go.etcd.io", "github.com/aws"}},
}

// sourceClients lets each token-source adapter under
// api/client/tokensource import its own service's client library (and its
// dependencies), and nothing else outside the standard library: the rest
// of api keeps to the standard library.
var sourceClients = map[string]string{
	"fencegate/api/client/tokensource/zookeeper": "github.com/go-zookeeper/zk",
}

type goPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func TestImportRules(t *testing.T) {
	for _, rule := range rules {
		t.Run(rule.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", rule.pkg).Output()
			if err != nil {
				t.Fatalf("go list %s: %v", rule.pkg, err)
			}
			dec := json.NewDecoder(strings.NewReader(string(out)))
			for dec.More() {
				var p goPackage
				if err := dec.Decode(&p); err != nil {
					t.Fatal(err)
				}
				deps := p.Deps
				if rule.direct {
					deps = p.Imports
				}
				for _, dep := range deps {
					client, hasClient := sourceClients[p.ImportPath]
					ownClient := hasClient && (dep == client || strings.HasPrefix(dep, client+"/"))
					if rule.stdlibOnly && !isStdlib(dep) && !strings.HasPrefix(dep, "fencegate/api") && !ownClient {
						t.Errorf("%s imports %s; it may import only the standard library", p.ImportPath, dep)
					}
					for _, f := range rule.forbidden {
						if dep == f || strings.HasPrefix(dep, f+"/") {
							t.Errorf("%s imports %s, which it must not (%s)", p.ImportPath, dep, f)
						}
					}
				}
			}
		})
	}
}

// isStdlib reports whether an import path is in the standard library: its
// first element has no dot.
func isStdlib(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && first != "fencegate"
}
