// Package config turns fencegate's flags, environment variables and
// config file into the typed, checked configs of the packages that
// cmd/fencegate wires together (gateway.Config, tokenstore.Config,
// s3.Config, partner routes, auth, the listener's TLS, logging and
// tracing). A flag wins over its environment variable (FENCEGATE_ and
// the flag's name), which wins over the config file, which wins over the
// default. Only cmd/fencegate imports it: it is the one place that reads
// flags and the environment.
//
// Adding a setting is one flag (in ParseServe, ParseDev or one of the
// add*Flags), one field of the file (in the tables below, named for the
// flag) and one validation; where the package the setting feeds has the
// rule, the validation calls it, and adds the flag's or the field's name.
package config

// The config file: one YAML file for `fencegate serve` and `fencegate dev`
// (--config FILE, or FENCEGATE_CONFIG). Its scalar settings are the flags'
// settings under other names (http.listen is --listen); they are applied
// to the flags that neither the command line nor the environment set, so
// that a flag wins over the environment, which wins over the file, which
// wins over the default. Partner routes and auth exist only in the file.
//
// The file is decoded into a yaml.Node tree, not into structs, so that
// every error can name the file, the line and the field's path, such as
// fencegate.yaml:14: partners[1].upstream: scheme "ftp" not allowed.
// Everything is checked before anything starts, and every problem is
// reported, not only the first.

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"fencegate/edge"
	"fencegate/internal/fielderr"
	"fencegate/internal/logging"
	"fencegate/internal/tlsfiles"
	"fencegate/internal/tracing"
	"fencegate/partners"
)

// maxConfigBytes bounds the config file: it is read whole.
const maxConfigBytes = 4 << 20

// maxSize is the largest size the file's size fields decode; the
// packages they feed have their own bounds.
const maxSize = 1 << 62

// File is a loaded and checked config file.
type File struct {
	// path is the file's name as given.
	path string
	// settings are the values for flags, by flag name, in the form the
	// flag parses.
	settings map[string]fileSetting
	// partners are the partner routes, in file order; nil without a
	// partners section.
	partners []partners.PartnerRoute
	// auth is the auth section; nil without one.
	auth *edge.Auth
	// buckets are the buckets section's entries, in file order; nil
	// without one (every bucket in S3).
	buckets []Bucket
	// answers is the partner_answers section; zero without one.
	answers PartnerAnswers
	// identityBudget is the partner_identity_budget section; zero (the
	// gateway's defaults) without one.
	identityBudget partners.PartnerBudget
	// clientCertsAt is where the first client certificate is mapped
	// ("FILE:LINE: auth.identities[0].client_certs"), "" when none is:
	// client certificates need a TLS listener that asks for them.
	clientCertsAt string
}

// fileSetting is one flag's value from the file.
type fileSetting struct {
	value string
	// path is the field's path, such as http.listen.
	path string
	// at is "FILE:LINE: path", for errors.
	at string
}

// configError is one problem in the config file.
type configError struct {
	file string
	line int
	path string // the field's path, such as partners[1].upstream; "" for the whole file
	msg  string
}

func (e *configError) Error() string {
	if e.path == "" {
		return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.file, e.line, e.path, e.msg)
}

// LoadFile reads, decodes and checks the config file at path.
// ${NAME} in partners' add_headers and the *_env settings are looked up
// with lookupEnv. Relative paths of files in it (certificates) are
// relative to the config file's directory. The error lists every problem,
// each as FILE:LINE: field: message.
func LoadFile(path string, lookupEnv LookupEnv) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("config file %s: larger than %v", path, byteSize(maxConfigBytes))
	}
	return parseConfig(path, filepath.Dir(path), data, lookupEnv)
}

// parseConfig decodes and checks data, the config file named path, whose
// relative file names are relative to dir.
func parseConfig(path, dir string, data []byte, lookupEnv LookupEnv) (*File, error) {
	d := &decoder{
		file:      path,
		dir:       dir,
		lookupEnv: lookupEnv,
		out:       &File{path: path, settings: map[string]fileSetting{}},
		nodes:     map[string]*yaml.Node{},
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &configError{file: path, line: 1, msg: "the file is empty; want a mapping such as `etcd: {endpoints: [http://127.0.0.1:2379]}`"}
		}
		return nil, yamlSyntaxError(path, err)
	}
	var second yaml.Node
	if err := dec.Decode(&second); err == nil {
		return nil, &configError{file: path, line: second.Line, msg: "a second YAML document (---); want one"}
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlSyntaxError(path, err)
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, &configError{file: path, line: 1, msg: "the file is empty"}
		}
		doc = doc.Content[0]
	}
	d.root = doc
	d.fields(doc, "", topLevel)
	d.crossValidate()
	if len(d.errs) > 0 {
		slices.SortStableFunc(d.errs, func(a, b *configError) int { return cmp.Compare(a.line, b.line) })
		errs := make([]error, len(d.errs))
		for i, e := range d.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	return d.out, nil
}

// yamlSyntaxError turns a YAML parser error into a configError; the
// parser's messages start with "yaml: line N: ".
func yamlSyntaxError(path string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		var n int
		if _, scanErr := fmt.Sscanf(rest, "%d:", &n); scanErr == nil && n > 0 {
			line = n
			_, msg, _ = strings.Cut(rest, ": ")
		}
	}
	return &configError{file: path, line: line, msg: "YAML: " + msg}
}

// decoder walks the YAML tree, collecting settings and errors.
type decoder struct {
	// root is the document's top-level mapping.
	root      *yaml.Node
	file      string
	dir       string
	lookupEnv LookupEnv
	out       *File
	errs      []*configError
	// nodes are the value nodes of the fields present, valid or not, by
	// path, for the checks that involve more than one.
	nodes map[string]*yaml.Node
}

// errorf records a problem with the node n at path.
func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	line := 1
	if n != nil && n.Line > 0 {
		line = n.Line
	}
	d.errs = append(d.errs, &configError{file: d.file, line: line, path: path, msg: fmt.Sprintf(format, args...)})
}

// fieldErrors records the *fielderr.Error values in err, each at the
// line of its field: the field's path is prefix and its Field, or what
// aliases maps that to (auth's api_keys[2] is in the file under an
// identity). A field under an entry (a route, an identity) whose
// decoding failed is passed over: its value is not what the file says,
// and the decoding error says why.
func (d *decoder) fieldErrors(err error, prefix string, aliases map[string]string) {
	resolve := func(field string) string {
		field = prefix + field
		if a, ok := aliases[field]; ok {
			return a
		}
		return field
	}
	for _, fe := range fielderr.List(err) {
		path, n := d.locate(resolve(fe.Field))
		if d.failedUnder(entryOf(path)) {
			continue
		}
		msg := fe.Err.Error()
		if fe.First != "" {
			if _, first := d.locate(resolve(fe.First)); first != nil {
				msg += fmt.Sprintf(" (first at line %d)", first.Line)
			}
		}
		d.errorf(n, path, "%s", msg)
	}
}

// locate finds the field at path (such as partners[0].methods[1] or
// partners[0].add_headers.X-Api-Key) in the file, matching mapping keys
// case aside (header names). It returns the path as the file spells it
// and the field's value node, or the deepest node found on the way.
func (d *decoder) locate(path string) (string, *yaml.Node) {
	n, spelt := d.root, ""
	for part := range strings.SplitSeq(path, ".") {
		key, indexes, _ := strings.Cut(part, "[")
		if key != "" {
			next := (*yaml.Node)(nil)
			for i := 0; n != nil && n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
				if strings.EqualFold(n.Content[i].Value, key) {
					next, key = n.Content[i+1], n.Content[i].Value
					break
				}
			}
			if next == nil {
				return joinPath(spelt, key), n
			}
			n, spelt = next, joinPath(spelt, key)
		}
		if indexes == "" {
			continue
		}
		for index := range strings.SplitSeq(strings.TrimSuffix(indexes, "]"), "][") {
			i, err := strconv.Atoi(index)
			if err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return spelt + "[" + index + "]", n
			}
			n, spelt = n.Content[i], fmt.Sprintf("%s[%d]", spelt, i)
		}
	}
	return spelt, n
}

// entryOf returns the entry of a list that path is in (partners[1] for
// partners[1].name, auth.identities[0] for auth.identities[0].api_keys[2]),
// or path itself.
func entryOf(path string) string {
	if i := strings.Index(path, "]"); i >= 0 {
		return path[:i+1]
	}
	return path
}

// failedUnder reports whether decoding failed at path or below it.
func (d *decoder) failedUnder(path string) bool {
	for _, e := range d.errs {
		if e.path == path || strings.HasPrefix(e.path, path+".") || strings.HasPrefix(e.path, path+"[") {
			return true
		}
	}
	return false
}

// at returns "FILE:LINE: path" for n.
func (d *decoder) at(n *yaml.Node, path string) string {
	return fmt.Sprintf("%s:%d: %s", d.file, n.Line, path)
}

// field is one key of a mapping and what decodes its value.
type field struct {
	key    string
	decode func(d *decoder, n *yaml.Node, path string)
}

// fields decodes the mapping n at path: each key with its field, refusing
// unknown and repeated keys.
func (d *decoder) fields(n *yaml.Node, path string, known []field) {
	if !d.isKind(n, path, yaml.MappingNode, "a mapping") {
		return
	}
	firstAt := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		if key.Kind != yaml.ScalarNode {
			d.errorf(key, path, "keys must be plain names")
			continue
		}
		p := joinPath(path, key.Value)
		if line, dup := firstAt[key.Value]; dup {
			d.errorf(key, p, "repeated (first at line %d)", line)
			continue
		}
		firstAt[key.Value] = key.Line
		i := slices.IndexFunc(known, func(f field) bool { return f.key == key.Value })
		if i < 0 {
			names := make([]string, len(known))
			for j, f := range known {
				names[j] = f.key
			}
			d.errorf(key, p, "unknown field (want one of %s)", strings.Join(names, ", "))
			continue
		}
		if value.Kind == yaml.AliasNode {
			d.errorf(value, p, "YAML aliases are not supported")
			continue
		}
		d.nodes[p] = value
		known[i].decode(d, value, p)
	}
}

// isKind reports whether n is of kind, recording an error naming want if
// it is not.
func (d *decoder) isKind(n *yaml.Node, path string, kind yaml.Kind, want string) bool {
	if n.Kind == kind && !(kind == yaml.ScalarNode && isNull(n)) {
		return true
	}
	d.errorf(n, path, "want %s, got %s", want, describe(n))
	return false
}

// isNull reports whether n is YAML's null (an empty value, ~ or null).
func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// describe names what n is, for errors.
func describe(n *yaml.Node) string {
	switch {
	case isNull(n):
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.AliasNode:
		return "an alias"
	}
	// The value is not quoted: it may be a secret in the wrong place.
	switch n.ShortTag() {
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "true or false"
	default:
		return "a single value"
	}
}

// joinPath appends key to path; a key that is not a plain name is quoted,
// so that an error's path stays on one line.
func joinPath(path, key string) string {
	if !plainKey.MatchString(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// plainKey is a key that paths show unquoted.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_*][A-Za-z0-9_.*/-]{0,127}$`)

// scalar returns n's value when n is a non-null scalar.
func (d *decoder) scalar(n *yaml.Node, path, want string) (string, bool) {
	if !d.isKind(n, path, yaml.ScalarNode, want) {
		return "", false
	}
	return n.Value, true
}

// list returns the items of the list n.
func (d *decoder) list(n *yaml.Node, path, want string) ([]*yaml.Node, bool) {
	if !d.isKind(n, path, yaml.SequenceNode, want) {
		return nil, false
	}
	for i, item := range n.Content {
		if item.Kind == yaml.AliasNode {
			d.errorf(item, fmt.Sprintf("%s[%d]", path, i), "YAML aliases are not supported")
			return nil, false
		}
	}
	return n.Content, true
}

// nonEmpty reports whether a decoded list of count items has any, and
// otherwise reports it empty, wanting want.
func (d *decoder) nonEmpty(n *yaml.Node, path string, count int, want string) bool {
	if count == 0 {
		d.errorf(n, path, "empty; want %s", want)
		return false
	}
	return true
}

// strings returns the list n of non-empty strings.
func (d *decoder) strings(n *yaml.Node, path, want string) ([]string, bool) {
	items, ok := d.list(n, path, "a list of "+want)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		s, ok := d.scalar(item, p, want)
		if !ok {
			return nil, false
		}
		if strings.TrimSpace(s) == "" {
			d.errorf(item, p, "empty; want %s", want)
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// set records value for the flag flagName, from n at path.
func (d *decoder) set(flagName, value string, n *yaml.Node, path string) {
	d.out.settings[flagName] = fileSetting{value: value, path: path, at: d.at(n, path)}
}

// A setting is a field that gives a flag its value.

// stringSetting is a non-empty string for flagName, checked by validate (if
// not nil), whose error message is reported as is.
func stringSetting(key, flagName, want string, validate func(string) error) field {
	return field{key, func(d *decoder, n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, want)
		if !ok {
			return
		}
		if s == "" {
			d.errorf(n, path, "empty; want %s", want)
			return
		}
		if validate != nil {
			if err := validate(s); err != nil {
				d.errorf(n, path, "%v", err)
				return
			}
		}
		d.set(flagName, s, n, path)
	}}
}

// durationMin says how small a duration may be.
type durationMin int

const (
	aboveZero durationMin = iota
	zeroOrMore
)

// durationSetting is a duration such as 10s for flagName.
func durationSetting(key, flagName string, least durationMin) field {
	return field{key, func(d *decoder, n *yaml.Node, path string) {
		if dur, ok := d.duration(n, path, least); ok {
			d.set(flagName, dur.String(), n, path)
		}
	}}
}

// duration decodes a duration such as 10s, 2m or 1h30m.
func (d *decoder) duration(n *yaml.Node, path string, least durationMin) (time.Duration, bool) {
	s, ok := d.scalar(n, path, "a duration such as 10s")
	if !ok {
		return 0, false
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.errorf(n, path, "%q is not a duration; want a number with a unit, such as 500ms, 10s or 2m", s)
		return 0, false
	}
	if err := validateDuration(dur, least); err != nil {
		d.errorf(n, path, "%v", err)
		return 0, false
	}
	return dur, true
}

// validateDuration checks a duration setting's value (the file's field or
// the flag).
func validateDuration(dur time.Duration, least durationMin) error {
	switch {
	case least == aboveZero && dur <= 0:
		return fmt.Errorf("%v: must be above zero", dur)
	case dur < 0:
		return fmt.Errorf("%v: must not be negative", dur)
	}
	return nil
}

// sizeSetting is a size in bytes for flagName, from least to most.
func sizeSetting(key, flagName string, least, most int64) field {
	return field{key, func(d *decoder, n *yaml.Node, path string) {
		if size, ok := d.size(n, path, least, most); ok {
			d.set(flagName, byteSize(size).String(), n, path)
		}
	}}
}

// size decodes a size in bytes such as 65536 or 64KiB, from least to most.
func (d *decoder) size(n *yaml.Node, path string, least, most int64) (int64, bool) {
	s, ok := d.scalar(n, path, "a size such as 64KiB")
	if !ok {
		return 0, false
	}
	var b byteSize
	if err := b.Set(s); err != nil {
		d.errorf(n, path, "%q: %v", s, err)
		return 0, false
	}
	if err := validateSize(b, least, most); err != nil {
		d.errorf(n, path, "%v", err)
		return 0, false
	}
	return int64(b), true
}

// validateSize checks a size setting's value (the file's field or the
// flag): from least to most.
func validateSize(b byteSize, least, most int64) error {
	switch {
	case most == maxSize && int64(b) < least:
		return fmt.Errorf("%v: must be at least %v", b, byteSize(least))
	case int64(b) < least || int64(b) > most:
		return fmt.Errorf("%v: must be from %v to %v", b, byteSize(least), byteSize(most))
	}
	return nil
}

// countSetting is a count for flagName: an integer from 0 (no limit) up.
func countSetting(key, flagName string) field {
	return field{key, func(d *decoder, n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "a whole number, 0 or more")
		if !ok {
			return
		}
		count, err := strconv.Atoi(s)
		if err != nil || n.ShortTag() != "!!int" || count < 0 {
			d.errorf(n, path, "%q: want a whole number, 0 or more (0: no limit)", s)
			return
		}
		d.set(flagName, strconv.Itoa(count), n, path)
	}}
}

// intSetting is a whole number for flagName, from least to most.
func intSetting(key, flagName string, least, most int) field {
	return field{key, func(d *decoder, n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "a whole number")
		if !ok {
			return
		}
		i, err := strconv.Atoi(s)
		switch {
		case err != nil:
			d.errorf(n, path, "%q: want a whole number", s)
		case i < least || i > most:
			d.errorf(n, path, "%d: must be from %d to %d", i, least, most)
		default:
			d.set(flagName, strconv.Itoa(i), n, path)
		}
	}}
}

// boolSetting is true or false for flagName.
func boolSetting(key, flagName string) field {
	return field{key, func(d *decoder, n *yaml.Node, path string) {
		if b, ok := d.bool(n, path); ok {
			d.set(flagName, fmt.Sprint(b), n, path)
		}
	}}
}

// bool decodes true or false.
func (d *decoder) bool(n *yaml.Node, path string) (bool, bool) {
	s, ok := d.scalar(n, path, "true or false")
	if !ok {
		return false, false
	}
	var b bool
	if n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		d.errorf(n, path, "%q: want true or false", s)
		return false, false
	}
	return b, true
}

// fileSettingField is the name of a file for flagName, relative to the
// config file's directory unless absolute. The file must exist.
func fileSettingField(key, flagName string) field {
	return field{key, func(d *decoder, n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "a file name")
		if !ok {
			return
		}
		if s == "" {
			d.errorf(n, path, "empty; want a file name")
			return
		}
		name := s
		if !filepath.IsAbs(name) {
			name = filepath.Join(d.dir, name)
		}
		if _, err := os.Stat(name); err != nil {
			d.errorf(n, path, "%v", err)
			return
		}
		d.set(flagName, name, n, path)
	}}
}

// secretEnvSetting is the name of an environment variable that holds the
// value for flagName (a password): the variable must be set and not empty.
func secretEnvSetting(key, flagName string) field {
	return field{key, func(d *decoder, n *yaml.Node, path string) {
		name, ok := d.scalar(n, path, "the name of an environment variable")
		if !ok {
			return
		}
		if !envNamePattern.MatchString(name) {
			d.errorf(n, path, "%q is not an environment variable name (want letters, digits and _)", name)
			return
		}
		value, ok := d.lookupEnv(name)
		if !ok || value == "" {
			d.errorf(n, path, "environment variable %s is not set", name)
			return
		}
		d.set(flagName, value, n, path)
	}}
}

// section is the mapping key, whose keys are fields.
func section(key string, fields []field) field {
	return field{key, func(d *decoder, n *yaml.Node, path string) { d.fields(n, path, fields) }}
}

// topLevel are the sections of the file.
var topLevel = []field{
	section("http", httpFields),
	section("etcd", etcdFields),
	section("s3", s3Fields),
	section("s3_api", s3APIFields),
	{"buckets", (*decoder).buckets},
	section("limits", limitFields),
	section("objects", objectFields),
	section("multipart", multipartFields),
	section("events", eventsFields),
	section("marks", markFields),
	section("log", logFields),
	section("tracing", tracingFields),
	{"token_checks", (*decoder).TokenChecks},
	{"partners", (*decoder).partners},
	{"partner_answers", (*decoder).partnerAnswers},
	{"partner_identity_budget", func(d *decoder, n *yaml.Node, path string) { d.out.identityBudget = d.partnerBudget(n, path) }},
	{"auth", (*decoder).auth},
}

var httpFields = []field{
	stringSetting("listen", "listen", "host:port", validateHostPort),
	durationSetting("read_header_timeout", "read-header-timeout", aboveZero),
	durationSetting("read_timeout", "read-timeout", zeroOrMore),
	durationSetting("write_timeout", "write-timeout", zeroOrMore),
	durationSetting("idle_timeout", "idle-timeout", aboveZero),
	durationSetting("shutdown_timeout", "shutdown-timeout", aboveZero),
	durationSetting("drain_delay", "drain-delay", zeroOrMore),
	section("tls", []field{
		fileSettingField("cert_file", "tls-cert"),
		fileSettingField("key_file", "tls-key"),
		fileSettingField("client_ca_file", "tls-client-ca"),
	}),
}

var etcdFields = []field{
	{"endpoints", func(d *decoder, n *yaml.Node, path string) {
		endpoints, ok := d.strings(n, path, "etcd client URLs")
		if !ok || !d.nonEmpty(n, path, len(endpoints), "at least one URL such as http://127.0.0.1:2379") {
			return
		}
		for i, e := range endpoints {
			if err := validateEtcdEndpoint(e); err != nil {
				d.errorf(n.Content[i], fmt.Sprintf("%s[%d]", path, i), "%v", err)
				return
			}
		}
		if err := validateEtcdEndpoints(endpoints); err != nil {
			d.errorf(n, path, "mixes http:// and https:// endpoints")
			return
		}
		d.set("etcd-endpoints", strings.Join(endpoints, ","), n, path)
	}},
	stringSetting("prefix", "etcd-prefix", "a key prefix such as fencegate/", nil),
	stringSetting("username", "etcd-username", "a user name", nil),
	stringSetting("password", "etcd-password", "a password", nil),
	secretEnvSetting("password_env", "etcd-password"),
	durationSetting("dial_timeout", "etcd-dial-timeout", aboveZero),
	durationSetting("request_timeout", "etcd-request-timeout", aboveZero),
	section("tls", []field{
		fileSettingField("ca_file", "etcd-ca"),
		fileSettingField("cert_file", "etcd-cert"),
		fileSettingField("key_file", "etcd-key"),
	}),
}

var s3Fields = []field{
	stringSetting("endpoint", "s3-endpoint", "a URL such as http://127.0.0.1:7070", func(s string) error {
		if validateS3Endpoint(s) != nil {
			return fmt.Errorf("%q: want a URL such as http://127.0.0.1:7070", s)
		}
		return nil
	}),
	stringSetting("region", "s3-region", "a region such as us-east-1", nil),
	boolSetting("path_style", "s3-path-style"),
	stringSetting("access_key", "s3-access-key", "an access key id", nil),
	stringSetting("secret_key", "s3-secret-key", "a secret access key", nil),
	secretEnvSetting("secret_key_env", "s3-secret-key"),
	intSetting("max_conns", "s3-max-conns", 1, 1<<16),
	durationSetting("conn_wait_timeout", "s3-conn-wait-timeout", aboveZero),
}

var limitFields = []field{
	sizeSetting("buffer_bytes", "buffer-bytes", 1, maxSize),
	sizeSetting("buffer_budget_bytes", "buffer-budget-bytes", 1, maxSize),
	sizeSetting("max_body_bytes", "max-body-bytes", 1, maxSize),
	sizeSetting("max_header_bytes", "max-header-bytes", minHeaderBytes, maxHeaderBytes),
	durationSetting("transfer_chunk_timeout", "transfer-chunk-timeout", aboveZero),
	countSetting("max_requests_per_client", "max-requests-per-client"),
	countSetting("max_sessions_per_identity", "max-sessions-per-identity"),
	countSetting("max_locks_per_session", "max-locks-per-session"),
	countSetting("max_lock_waiters", "max-lock-waiters"),
}

// multipartFields are the multipart uploads of REST PUTs above the
// threshold; S3's bounds on a part and the TTL's least are the gateway's
// rules (limitsCrossValidate).
var multipartFields = []field{
	sizeSetting("threshold", "multipart-threshold", 0, maxSize),
	sizeSetting("part_size", "multipart-part-size", 1, maxSize),
	durationSetting("upload_ttl", "upload-ttl", aboveZero),
}

// eventsFields bound the event feed (GET /v1/events).
var eventsFields = []field{
	intSetting("max_subscribers", "events-max-subscribers", 1, maxEventSubscribers),
	intSetting("buffer", "events-buffer", 1, maxEventBuffer),
	intSetting("history", "events-history", 0, maxEventHistory),
	sizeSetting("history_bytes", "events-history-bytes", minEventHistoryBytes, maxEventHistoryBytes),
}

var objectFields = []field{
	boolSetting("tombstones_for_absent", "tombstones-for-absent"),
	durationSetting("ticket_expiry", "ticket-expiry", aboveZero),
}

var markFields = []field{
	{"retention", func(d *decoder, n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "a duration such as 24h")
		if !ok {
			return
		}
		if _, err := time.ParseDuration(s); err != nil {
			d.errorf(n, path, "%q is not a duration; want a number with a unit, such as 24h (negative: marks are kept for ever)", s)
			return
		}
		d.set("mark-retention", s, n, path)
	}},
	durationSetting("tombstone_retention", "tombstone-retention", zeroOrMore),
	durationSetting("eviction_interval", "mark-eviction-interval", aboveZero),
}

var logFields = []field{
	stringSetting("level", "log-level", "debug, info, warn or error", func(s string) error {
		var level slog.Level
		if err := level.UnmarshalText([]byte(s)); err != nil {
			return fmt.Errorf("%q: want debug, info, warn or error", s)
		}
		return nil
	}),
	stringSetting("format", "log-format", "text or json", logging.ValidateFormat),
}

var tracingFields = []field{
	stringSetting("otlp_endpoint", "otlp-endpoint", "a URL such as http://127.0.0.1:4317", tracing.ValidateEndpoint),
	{"sample_ratio", func(d *decoder, n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "a number from 0 to 1")
		if !ok {
			return
		}
		ratio, err := strconv.ParseFloat(s, 64)
		if err != nil || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
			d.errorf(n, path, "%q: want a number from 0 to 1", s)
			return
		}
		if err := tracing.ValidateSampleRatio(ratio); err != nil {
			d.errorf(n, path, "%v", err)
			return
		}
		d.set("trace-sample-ratio", strconv.FormatFloat(ratio, 'g', -1, 64), n, path)
	}},
}

// TokenChecks decodes token_checks, a mapping of scope (a bucket,
// partner/ROUTE, or "*": every other resource) to none, plausible or
// held:LOCK, into --token-checks.
func (d *decoder) TokenChecks(n *yaml.Node, path string) {
	if !d.isKind(n, path, yaml.MappingNode, "a mapping of bucket, partner/ROUTE or * to none, plausible or held:LOCK") {
		return
	}
	var items []string
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		bucket, keyOK := d.scalar(key, path, "a bucket name, partner/ROUTE or *")
		p := joinPath(path, bucket)
		spec, valueOK := d.scalar(value, p, "none, plausible or held:LOCK")
		if !keyOK || !valueOK {
			ok = false
			continue
		}
		item := bucket + "=" + spec
		var one TokenChecks
		if err := one.Set(item); err != nil || len(one) != 1 {
			d.errorf(value, p, "%v", cmp.Or(err, errors.New("want none, plausible or held:LOCK")))
			ok = false
			continue
		}
		items = append(items, item)
	}
	if !ok {
		return
	}
	value := strings.Join(items, ",")
	var all TokenChecks
	if err := all.Set(value); err != nil {
		d.errorf(n, path, "%v", err) // a scope named twice
		return
	}
	d.set("token-checks", value, n, path)
}

// has reports whether the file set the flag flagName with a valid value.
func (d *decoder) has(flagName string) bool {
	_, ok := d.out.settings[flagName]
	return ok
}

// envNamePattern is the syntax of the environment variable names that the
// file refers to.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validateHostPort checks a listen address: host:port with a numeric port.
func validateHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want host:port, such as 127.0.0.1:8080", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: port must be a number from 0 to 65535", addr)
	}
	return nil
}

// validateEtcdEndpoint checks one etcd endpoint: an http(s):// URL with a
// host and no path, or a host:port.
func validateEtcdEndpoint(e string) error {
	if strings.ContainsAny(e, ", ") {
		return fmt.Errorf("%q: one URL per item, without commas or spaces", e)
	}
	if !strings.Contains(e, "://") {
		if validateHostPort(e) != nil {
			return fmt.Errorf("%q: want a URL such as http://host:2379 or a host:port", e)
		}
		return nil
	}
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("%q: want a URL such as http://host:2379 or https://host:2379", e)
	}
	return nil
}

// crossValidate checks the settings that go together.
func (d *decoder) crossValidate() {
	// together checks that the field a and one of the fields bs are
	// both set or both not.
	together := func(why, a string, bs ...string) {
		na := d.nodes[a]
		var nb *yaml.Node
		b := bs[0]
		for _, name := range bs {
			if n := d.nodes[name]; n != nil {
				nb, b = n, name
				break
			}
		}
		switch {
		case na != nil && nb == nil:
			d.errorf(na, a, "needs %s%s", strings.Join(bs, " or "), why)
		case nb != nil && na == nil:
			d.errorf(nb, b, "needs %s%s", a, why)
		}
	}
	exclusive := func(a, b string) {
		if na, nb := d.nodes[a], d.nodes[b]; na != nil && nb != nil {
			d.errorf(nb, b, "set %s or %s, not both", a, b)
		}
	}
	exclusive("etcd.password", "etcd.password_env")
	together("", "etcd.username", "etcd.password", "etcd.password_env")
	together("", "etcd.tls.cert_file", "etcd.tls.key_file")
	if n := d.nodes["etcd.endpoints"]; n != nil && (d.nodes["etcd.tls.ca_file"] != nil || d.nodes["etcd.tls.cert_file"] != nil) {
		for i, item := range n.Content {
			if strings.HasPrefix(item.Value, "http://") {
				d.errorf(item, fmt.Sprintf("etcd.endpoints[%d]", i), "%q is http:// but etcd.tls is set: use https://", item.Value)
			}
		}
	}
	exclusive("s3.secret_key", "s3.secret_key_env")
	together(" (neither: the AWS SDK's default chain)", "s3.access_key", "s3.secret_key", "s3.secret_key_env")
	together("", "http.tls.cert_file", "http.tls.key_file")
	if n := d.nodes["http.tls.client_ca_file"]; n != nil && d.nodes["http.tls.cert_file"] == nil {
		d.errorf(n, "http.tls.client_ca_file", "needs http.tls.cert_file and key_file: client certificates need a TLS listener")
	}
	if d.has("tls-cert") && d.has("tls-key") && (d.has("tls-client-ca") || d.nodes["http.tls.client_ca_file"] == nil) {
		_, err := tlsfiles.Server(d.out.settings["tls-cert"].value, d.out.settings["tls-key"].value, d.out.settings["tls-client-ca"].value)
		if err != nil {
			d.errorf(d.nodes["http.tls.cert_file"], "http.tls", "%v", err)
		}
	}
	if pair := d.has("etcd-cert") && d.has("etcd-key"); d.has("etcd-ca") || pair {
		cert, key := d.out.settings["etcd-cert"].value, d.out.settings["etcd-key"].value
		if !pair {
			cert, key = "", ""
		}
		_, err := tlsfiles.Client(d.out.settings["etcd-ca"].value, cert, key)
		switch {
		case errors.Is(err, tlsfiles.ErrCAFile):
			d.errorf(d.nodes["etcd.tls.ca_file"], "etcd.tls.ca_file", "%v", err)
		case err != nil:
			d.errorf(d.nodes["etcd.tls.cert_file"], "etcd.tls", "%v", err)
		}
	}
	if d.has("token-checks") {
		var checks TokenChecks
		if checks.Set(d.out.settings["token-checks"].value) == nil {
			if err := checks.validateRoutes(d.out.partners); err != nil {
				d.errorf(d.nodes["token_checks"], "token_checks", "%v", err)
			}
		}
	}
	d.limitsCrossValidate()
	d.bucketsCrossValidate()
	if d.out.partners != nil && d.out.auth != nil {
		d.fieldErrors(partners.ValidatePartnerGrants(d.out.partners, *d.out.auth), "", nil)
	}
}

// limitsCrossValidate checks the file's limits that go together with the
// gateway's rules (gateway.Config.Validate), as far as the file sets
// them: a rule on a field it leaves to a flag or the default is checked
// once the flags are merged.
func (d *decoder) limitsCrossValidate() {
	var l limitFlags
	for _, f := range []struct {
		flag string
		to   *byteSize
	}{
		{"buffer-bytes", &l.buffer}, {"buffer-budget-bytes", &l.bufferBudget}, {"max-body-bytes", &l.maxBody},
		{"multipart-threshold", &l.multipartThreshold}, {"multipart-part-size", &l.multipartPartSize},
	} {
		if s, ok := d.out.settings[f.flag]; ok && f.to.Set(s.value) != nil {
			return
		}
	}
	if s, ok := d.out.settings["upload-ttl"]; ok {
		ttl, err := time.ParseDuration(s.value)
		if err != nil {
			return
		}
		l.uploadTTL = ttl
	}
	if s, ok := d.out.settings["ticket-expiry"]; ok {
		expiry, err := time.ParseDuration(s.value)
		if err != nil {
			return
		}
		l.ticketExpiry = expiry
	}
	// The gateway's fields are named as the limits section's, but for
	// the multipart section's.
	sections := map[string]string{
		"multipart_threshold": "multipart.threshold",
		"multipart_part_size": "multipart.part_size",
		"upload_ttl":          "multipart.upload_ttl",
		"ticket_expiry":       "objects.ticket_expiry",
	}
	yamlPath := func(field string) string {
		if p, ok := sections[field]; ok {
			return p
		}
		return "limits." + field
	}
	for _, fe := range fielderr.List(l.gateway().Validate(yamlPath)) {
		if n := d.nodes[yamlPath(fe.Field)]; n != nil {
			d.errorf(n, yamlPath(fe.Field), "%v", fe.Err)
		}
	}
}

// features returns the partner routes and auth of the command's config
// file (none without one). Client certificates in auth need a listener
// that asks for them: h must have a client CA.
func (c *command) features(h HTTP) (Features, error) {
	if c.file == nil {
		return Features{}, nil
	}
	if c.file.clientCertsAt != "" && h.TLSClientCA == "" {
		return Features{}, fmt.Errorf("%s: client certificates need http.tls.client_ca_file (or --tls-client-ca): "+
			"without it the listener never asks for one", c.file.clientCertsAt)
	}
	return c.file.Features(), nil
}

// Features returns the file's partner routes, auth and buckets.
func (f *File) Features() Features {
	return Features{Partners: f.partners, Auth: f.auth, Answers: f.answers, IdentityBudget: f.identityBudget, Buckets: f.buckets}
}

// apply gives every flag of c that neither the command line nor the
// environment set its value from the file. It returns the settings that
// c has no flag for, which the command ignores (dev runs its own etcd and
// S3 server).
func (f *File) apply(c *command, set map[string]bool) (ignored []string, err error) {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(f.settings)) {
		s := f.settings[name]
		fl := c.fs.Lookup(name)
		if fl == nil {
			ignored = append(ignored, s.path)
			continue
		}
		if set[name] {
			continue
		}
		c.source(name, s.at)
		if err := fl.Value.Set(s.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", s.at, err))
		}
	}
	return ignored, errors.Join(errs...)
}
