package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// envPrefix starts the environment variable of every flag:
// --etcd-endpoints falls back to FENCEGATE_ETCD_ENDPOINTS.
const envPrefix = "FENCEGATE_"

// LookupEnv is os.LookupEnv, or a map in tests.
type LookupEnv func(name string) (string, bool)

// envName returns the environment variable of the flag name.
func EnvName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// UsageError is a mistake in the command line, the environment or the
// config file: the command exits 2 for it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// usageErrorf returns a *UsageError.
func usageErrorf(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

// command is a subcommand's flag set, whose flags fall back to environment
// variables.
type command struct {
	fs          *flag.FlagSet
	synopsis    string // "fencegate serve [flags]"
	description string // paragraphs printed before the flags
	// configPath is the --config flag's value, nil for a command without
	// it (see addConfigFlag).
	configPath *string
	// file is the config file that parse loaded, nil without one.
	file *File
	// ignored are the file's settings that the command has no flag for.
	ignored []string
	// sources say where the flags that the command line did not set
	// got their values: the environment variable's name, or the file's
	// "FILE:LINE: path". See locate.
	sources map[string]string
}

func newCommand(name, synopsis, description string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// Errors are returned and reported once, by main; -h prints the
	// usage to stdout (see parse).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &command{fs: fs, synopsis: synopsis, description: description}
}

// addConfigFlag adds --config: a YAML config file whose settings parse
// gives the flags that neither the command line nor the environment set.
func (c *command) addConfigFlag() {
	c.configPath = new(string)
	c.fs.StringVar(c.configPath, "config", "", "YAML config `file` (see docs/configuration.md); flags and environment\n"+
		"variables override its settings")
}

// parse parses args, then gives every flag that was not on the command
// line the value of its environment variable, if that is set and not
// empty, and every flag set by neither the value from the config file
// (--config), if there is one: a flag wins over the environment, which
// wins over the file, which wins over the default. For -h it prints the
// usage to stdout and returns flag.ErrHelp.
func (c *command) parse(args []string, lookupEnv LookupEnv, stdout io.Writer) error {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.printUsage(stdout)
			return err
		}
		return usageErrorf("%s: %v (see fencegate %s -h)", c.fs.Name(), err, c.fs.Name())
	}
	if c.fs.NArg() > 0 {
		return usageErrorf("%s: unexpected argument %q (see fencegate %s -h)", c.fs.Name(), c.fs.Arg(0), c.fs.Name())
	}
	// given are the flags on the command line or in the environment: the
	// config file does not override them.
	given := make(map[string]bool)
	c.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	c.fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		value, ok := lookupEnv(EnvName(f.Name))
		if !ok || value == "" {
			return
		}
		given[f.Name] = true
		c.source(f.Name, EnvName(f.Name))
		// The value is not repeated: it may be a secret.
		if err := f.Value.Set(value); err != nil {
			errs = append(errs, fmt.Errorf("--%s: invalid value in %s: %v", f.Name, EnvName(f.Name), err))
		}
	})
	if len(errs) > 0 {
		return &UsageError{fmt.Errorf("%s: %w", c.fs.Name(), errors.Join(errs...))}
	}
	if c.configPath == nil || *c.configPath == "" {
		return nil
	}
	file, err := LoadFile(*c.configPath, lookupEnv)
	if err != nil {
		return &UsageError{fmt.Errorf("%s: %w", c.fs.Name(), err)}
	}
	if c.ignored, err = file.apply(c, given); err != nil {
		return &UsageError{fmt.Errorf("%s: %w", c.fs.Name(), err)}
	}
	c.file = file
	return nil
}

// source records where the flag name got its value.
func (c *command) source(name, from string) {
	if c.sources == nil {
		c.sources = make(map[string]string)
	}
	c.sources[name] = from
}

// locate prefixes each of the problems in err that starts with a flag
// (--buffer-bytes ...) whose value came from the environment or the file
// with where it came from: the variable (FENCEGATE_BUFFER_BYTES: ...),
// or the file's line and field (fencegate.yaml:3: limits.buffer_bytes:
// ...). A flag given on the command line, or left at its default, is
// named as it is.
func (c *command) locate(err error) error {
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range joined.Unwrap() {
			errs = append(errs, c.locate(e))
		}
		return errors.Join(errs...)
	}
	rest, ok := strings.CutPrefix(err.Error(), "--")
	if !ok {
		return err
	}
	name := rest[:strings.IndexFunc(rest+" ", func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') })]
	if from := c.sources[name]; from != "" {
		return fmt.Errorf("%s: %w", from, err)
	}
	return err
}

// printUsage prints the synopsis, the description and every flag with its
// environment variable and default.
func (c *command) printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", c.synopsis, strings.TrimSpace(c.description))
	if c.configPath != nil {
		fmt.Fprintf(w, "\nFlags (each can also be set with the environment variable in brackets, or in\n"+
			"the --config file; a flag on the command line wins over the environment, which\n"+
			"wins over the file, which wins over the default; an empty variable counts as unset):\n\n")
	} else {
		fmt.Fprintf(w, "\nFlags (each can also be set with the environment variable in brackets; a flag\n"+
			"on the command line wins over the environment, which wins over the default;\n"+
			"an empty variable counts as unset):\n\n")
	}
	c.fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if kind != "" {
			fmt.Fprintf(w, " %s", kind)
		}
		fmt.Fprintf(w, "  [$%s]\n", EnvName(f.Name))
		fmt.Fprintf(w, "      %s", strings.ReplaceAll(usage, "\n", "\n      "))
		if !isZeroDefault(f) {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// isZeroDefault reports whether f's default is a zero value, which the
// usage does not print.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "false", "0", "0s":
		return true
	}
	return false
}

// byteSize is a flag.Value for sizes in bytes: a decimal integer with an
// optional binary suffix, such as 65536, 64KiB, 8MiB or 5GiB.
type byteSize int64

var byteSuffixes = []struct {
	suffix string
	factor int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1},
}

// Set parses s. Negative sizes parse; the range is checked by validation,
// which names the flag.
func (b *byteSize) Set(s string) error {
	number, factor := strings.TrimSpace(s), int64(1)
	for _, u := range byteSuffixes {
		if n, ok := strings.CutSuffix(number, u.suffix); ok {
			number, factor = strings.TrimSpace(n), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(number, 10, 64)
	if err != nil {
		return fmt.Errorf("want a number of bytes such as 65536, 64KiB, 8MiB or 5GiB")
	}
	if n > math.MaxInt64/factor || n < math.MinInt64/factor {
		return fmt.Errorf("too large")
	}
	*b = byteSize(n * factor)
	return nil
}

// String formats b with the largest binary suffix that divides it.
func (b byteSize) String() string {
	n := int64(b)
	if n == 0 {
		return "0"
	}
	for _, u := range byteSuffixes[:4] {
		if n%u.factor == 0 {
			return strconv.FormatInt(n/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// validateListen checks that addr is a host:port for net.Listen, with a
// numeric port (0 picks a free one).
func validateListen(flagName, addr string) error {
	if err := validateHostPort(addr); err != nil {
		return fmt.Errorf("--%s %v", flagName, err)
	}
	return nil
}
