package main

import (
	"fmt"
	"io"

	"fencegate/internal/config"
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
		path, _ = lookupEnv(config.EnvName("config"))
		if path == "" {
			return usageErrorf("config check: want a FILE (or %s)", config.EnvName("config"))
		}
	}
	file, err := config.LoadFile(path, lookupEnv)
	if err != nil {
		return &usageError{Err: fmt.Errorf("config check: %w", err)}
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
	file.PrintSummary(stdout)
	for _, warning := range file.Features().Warnings() {
		fmt.Fprintf(stdout, "%s: warning: %s\n", path, warning)
	}
	return nil
}
