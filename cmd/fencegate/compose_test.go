package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"fencegate/internal/devstack"
)

// composeFile is the part of a docker-compose.yml the check reads.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Entrypoint  []string          `yaml:"entrypoint"`
		Environment map[string]string `yaml:"environment"`
		Build       *struct {
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
	} `yaml:"services"`
}

// composeVar expands ${NAME:-default} the way docker compose does when
// NAME is unset.
var composeVar = regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`)

// TestComposeFlagsMatchTheBinaries checks compose/docker-compose.yml
// without Docker: fencegate services' commands and environment go through
// fencegate's own flag parser, and etcd's and versitygw's flags must be
// flags of the real binaries (etcd built from the module fencegate links,
// versitygw from bin/).
func TestComposeFlagsMatchTheBinaries(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "compose", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatalf("compose file: %v", err)
	}
	etcdHelp := helpText(t, buildEtcd(t), "--help")
	versitygw, err := devstack.FindVersityGW()
	if err != nil {
		t.Fatal(err)
	}
	versitygwHelp := helpText(t, versitygw, "--help") + helpText(t, versitygw, "posix", "--help")

	kinds := map[string]int{}
	for name, svc := range cf.Services {
		switch {
		case svc.Build != nil && svc.Build.Dockerfile == "compose/Dockerfile":
			kinds["fencegate"]++
			if len(svc.Command) == 0 || svc.Command[0] != "serve" {
				t.Errorf("%s: command %q; want fencegate serve", name, svc.Command)
				continue
			}
			env := func(key string) (string, bool) {
				v, ok := svc.Environment[key]
				return composeVar.ReplaceAllString(v, "$1"), ok
			}
			if _, err := parseServe(svc.Command[1:], env, io.Discard); err != nil {
				t.Errorf("%s: fencegate refuses its flags: %v", name, err)
			}
		case strings.Contains(svc.Image, "/etcd:"):
			kinds["etcd"]++
			if !strings.HasSuffix(svc.Image, ":v3.7.3") {
				t.Errorf("%s: image %s; want etcd v3.7.3, the version fencegate is built and tested with", name, svc.Image)
			}
			checkFlags(t, name, svc.Command[1:], etcdHelp)
		case strings.Contains(svc.Image, "versitygw"):
			kinds["versitygw"]++
			checkFlags(t, name, svc.Command, versitygwHelp)
		}
	}
	if kinds["fencegate"] < 2 || kinds["etcd"] != 3 || kinds["versitygw"] != 1 {
		t.Errorf("compose has %v; want 2+ fencegate, 3 etcd members, 1 versitygw", kinds)
	}
}

// checkFlags fails for every --flag in args that help does not list.
func checkFlags(t *testing.T, service string, args []string, help string) {
	t.Helper()
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		flag, _, _ := strings.Cut(a, "=")
		if !regexp.MustCompile(`(^|[\s,])` + regexp.QuoteMeta(flag) + `([\s=,]|$)`).MatchString(help) {
			t.Errorf("%s: flag %s is not a flag of the binary", service, flag)
		}
	}
}

// buildEtcd builds etcd's own server main from the module version in
// go.mod.
func buildEtcd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "etcd")
	cmd := exec.Command("go", "build", "-o", bin, "go.etcd.io/etcd/server/v3")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build etcd: %v\n%s", err, out)
	}
	return bin
}

func helpText(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, _ := exec.Command(bin, args...).CombinedOutput() // help may exit non-zero
	if len(out) == 0 {
		t.Fatalf("%s %v printed nothing", bin, args)
	}
	return string(out)
}
