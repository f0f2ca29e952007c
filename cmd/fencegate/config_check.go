package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"fencegate/gateway"
)

const configUsage = `Usage: fencegate config check [FILE]

Check a config file as fencegate serve and fencegate dev would at start,
without starting anything: the YAML, every field's value, the files it
names (certificates), the environment variables it refers to (password_env,
${NAME} in add_headers). Print "ok", a summary and FILE: warning: lines for
what is valid but likely unsafe (exit 0), or every problem as
FILE:LINE: field: message and exit 2. FILE defaults to $FENCEGATE_CONFIG.

Settings that flags or FENCEGATE_* variables give are not required in the
file: the summary says what the file sets.
`

// runConfig is `fencegate config`: only `check` for now.
func runConfig(args []string, lookupEnv lookupEnvFunc, stdout io.Writer) error {
	if len(args) == 0 {
		return usageErrorf("config: want a subcommand: check FILE (see fencegate config -h)")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, configUsage)
		return nil
	case "check":
	default:
		return usageErrorf("config: unknown subcommand %q (want check)", args[0])
	}
	args = args[1:]
	var path string
	switch {
	case len(args) == 1 && (args[0] == "-h" || args[0] == "--help"):
		fmt.Fprint(stdout, configUsage)
		return nil
	case len(args) == 1:
		path = args[0]
	case len(args) > 1:
		return usageErrorf("config check: want one FILE, got %d arguments", len(args))
	default:
		path, _ = lookupEnv(envName("config"))
		if path == "" {
			return usageErrorf("config check: want a FILE (or %s)", envName("config"))
		}
	}
	file, err := loadConfigFile(path, lookupEnv)
	if err != nil {
		return &usageError{fmt.Errorf("config check: %w", err)}
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
	printConfigSummary(stdout, file)
	for _, warning := range (features{partners: file.partners, auth: file.auth}).warnings() {
		fmt.Fprintf(stdout, "%s: warning: %s\n", path, warning)
	}
	return nil
}

// warnings are what valid features configure that is likely unsafe:
// `config check` prints them, serve and dev log them at start.
func (f features) warnings() []string {
	var auth gateway.Auth
	if f.auth != nil {
		auth = *f.auth
	}
	return gateway.UnboundHeaderRouteWarnings(f.partners, auth)
}

// printConfigSummary prints what the file configures, without values:
// some are secrets.
func printConfigSummary(w io.Writer, f *configFile) {
	var fields []string
	for _, s := range f.settings {
		fields = append(fields, s.path)
	}
	slices.Sort(fields)
	if len(fields) == 0 {
		fields = []string{"none"}
	}
	fmt.Fprintf(w, "  settings: %s\n", strings.Join(fields, ", "))
	if f.partners != nil {
		names := make([]string, len(f.partners))
		for i, p := range f.partners {
			names[i] = p.Name + " -> " + p.Upstream.Redacted()
		}
		fmt.Fprintf(w, "  partner routes: %d (%s)\n", len(f.partners), strings.Join(names, ", "))
	}
	if f.auth != nil {
		fmt.Fprintf(w, "  auth: %d identities, %d API keys, %d client certificates\n",
			len(f.auth.Identities), len(f.auth.APIKeys), len(f.auth.ClientCerts))
	} else {
		fmt.Fprintf(w, "  auth: off (no auth section: every client may do everything)\n")
	}
}
