// Package doccheck owns one check: every link in the repository's user
// documentation (README.md and docs/*.md) resolves. A relative link must
// name a file or directory that exists in the repository, and its
// #fragment, where it has one and points into a markdown file, must name
// a heading of that file as GitHub derives anchors from headings. Links to
// http and https addresses are only checked to be well formed: the test
// never uses the network.
package doccheck

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinks checks the links of README.md and docs/*.md.
func TestDocLinks(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	links := 0
	for _, f := range files {
		problems, n, err := checkFile(root, f)
		if err != nil {
			t.Fatal(err)
		}
		links += n
		for _, p := range problems {
			t.Error(p)
		}
	}
	// The README alone links to every page of docs/: far fewer links
	// found means the parser stopped seeing them.
	if links < 20 {
		t.Errorf("found %d links in %d files; want 20 or more", links, len(files))
	}
}

// TestCheckFindsBrokenLinks feeds the checker a small tree with one link of
// each kind, good and broken, and checks that it reports exactly the
// broken ones.
func TestCheckFindsBrokenLinks(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/other.md", "# Other\n\n## Tokens, and why: `X-Fence-Token`\n\n## Tokens, and why: `X-Fence-Token`\n")
	write("api/openapi.yaml", "openapi: 3.1.0\n")
	write("README.md", strings.Join([]string{
		"# Title",
		"## The API in summary",
		"ok: [a](docs/other.md), [b](docs/other.md#tokens-and-why-x-fence-token),",
		"[b2](docs/other.md#tokens-and-why-x-fence-token-1), [c](#the-api-in-summary),",
		"[d](api/openapi.yaml), [e](api/), [f](https://github.com/anishathalye/porcupine),",
		"[g](<docs/other.md> \"title\"), ![h](api/openapi.yaml), [i][ref]",
		"",
		"[ref]: docs/other.md#other",
		"",
		"broken: [m](docs/missing.md), [n](docs/other.md#no-such-heading), [o](#nowhere),",
		"[p](https://), [q](http://exa mple.com/), [r](api/openapi.yaml#top),",
		"[s](../outside.md), [t][bad], [u](j)",
		"",
		"[bad]: docs/gone.md",
		"",
		"not links: `[x](docs/missing.md)`, [1, 2^63-1], [undefined][label], and in a code block:",
		"```",
		"[y](docs/missing.md)",
		"## Not a heading",
		"```",
	}, "\n"))

	problems, n, err := checkFile(root, filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, p := range problems {
		targets = append(targets, p.target)
	}
	want := []string{
		"docs/missing.md", "docs/other.md#no-such-heading", "#nowhere", "https://",
		"http://exa mple.com/", "api/openapi.yaml#top", "../outside.md", "docs/gone.md",
		"j",
	}
	slices.Sort(targets)
	slices.Sort(want)
	if !slices.Equal(targets, want) {
		t.Errorf("checkFile reported %q; want %q", targets, want)
		for _, p := range problems {
			t.Log(p)
		}
	}
	if n != 19 {
		t.Errorf("checkFile found %d links; want 19", n)
	}
}

func TestAnchor(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Guarantees and their limits", "guarantees-and-their-limits"},
		{"How a write is checked, and why in this order", "how-a-write-is-checked-and-why-in-this-order"},
		{"etcd out of space (NOSPACE)", "etcd-out-of-space-nospace"},
		{"Attacks at full scale", "attacks-at-full-scale"},
		{"fencegate dev, exit codes, shutdown and certificates", "fencegate-dev-exit-codes-shutdown-and-certificates"},
		{"The `X-Fence-Token` header", "the-x-fence-token-header"},
		{"Compaction and ABA", "compaction-and-aba"},
		{"A [link](x.md) and **bold** text", "a-link-and-bold-text"},
		{"snake_case stays", "snake_case-stays"},
		{"Two  spaces", "two--spaces"},
		{"Größe ≥ 5", "größe--5"},
	} {
		if got := anchor(tc.heading); got != tc.want {
			t.Errorf("anchor(%q) = %q; want %q", tc.heading, got, tc.want)
		}
	}
}

// problem is one link that does not resolve.
type problem struct {
	file   string // the markdown file, relative to the repository root
	line   int
	target string // the link's destination as written
	why    string
}

func (p problem) String() string {
	return fmt.Sprintf("%s:%d: link %q: %s", p.file, p.line, p.target, p.why)
}

// link is one markdown link destination and the line it is on.
type link struct {
	target string
	line   int
}

var (
	// inlineLink matches [text](destination) and ![alt](destination); the
	// destination may be in angle brackets and be followed by a title.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]*(?:\s[^)"']*[^)\s"'])?)(?:\s+"[^"]*"|\s+'[^']*')?\s*\)`)
	// refDefinition matches a reference definition, [label]: destination.
	refDefinition = regexp.MustCompile(`^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)`)
	// refLink matches [text][label].
	refLink = regexp.MustCompile(`\[[^\]]*\]\[([^\]]+)\]`)
	// codeSpan matches an inline code span (one or more backticks).
	codeSpan = regexp.MustCompile("(`+)[^`]*?(`+)")
	// atxHeading matches a heading line, # to ######.
	atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	// htmlAnchor matches an explicit anchor, <a name="x"> or id="x".
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// proseLines returns the lines of a markdown text that are not inside a
// fenced code block, with their 1-based numbers, and inline code spans
// replaced by a placeholder so that their brackets are not read as links.
func proseLines(text string) (lines []string, numbers []int) {
	fence := ""
	for i, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(l, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		lines = append(lines, codeSpan.ReplaceAllStringFunc(l, func(s string) string {
			// Keep the text of the span (a heading's anchor uses it) but
			// not the brackets or parentheses a link would need.
			return strings.NewReplacer("`", "", "[", "", "]", "", "(", "", ")", "").Replace(s)
		}))
		numbers = append(numbers, i+1)
	}
	return lines, numbers
}

// anchor returns the fragment GitHub gives a heading: the heading's text
// as rendered (links reduced to their text, emphasis and code marks
// dropped), lower-cased, with every character that is not a letter, a
// digit, a space, '-' or '_' dropped, and each space turned into '-'.
func anchor(heading string) string {
	heading = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the fragments a markdown text's headings (and explicit
// HTML anchors) define. Repeated headings get -1, -2, ... as on GitHub.
func anchors(text string) map[string]bool {
	defined := map[string]bool{}
	seen := map[string]int{}
	lines, _ := proseLines(text)
	for _, l := range lines {
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			defined[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := anchor(m[2])
		if n := seen[a]; n > 0 {
			defined[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			defined[a] = true
		}
		seen[a]++
	}
	return defined
}

// links returns every link destination of a markdown text: inline links
// and images, and reference links resolved through their definitions
// (an undefined label is not a link: GitHub shows it as text).
func links(text string) []link {
	lines, numbers := proseLines(text)
	defs := map[string]link{}
	for i, l := range lines {
		if m := refDefinition.FindStringSubmatch(l); m != nil {
			defs[strings.ToLower(m[1])] = link{strings.Trim(m[2], "<>"), numbers[i]}
		}
	}
	var out []link
	for i, l := range lines {
		if refDefinition.MatchString(l) {
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(l, -1) {
			out = append(out, link{strings.Trim(m[1], "<>"), numbers[i]})
		}
		for _, m := range refLink.FindAllStringSubmatch(l, -1) {
			if d, ok := defs[strings.ToLower(m[1])]; ok {
				out = append(out, link{d.target, numbers[i]})
			}
		}
	}
	return out
}

// checkFile checks every link of one markdown file under root. It returns
// the links that do not resolve, and how many links it checked.
func checkFile(root, file string) ([]problem, int, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, 0, err
	}
	rel, err := filepath.Rel(root, file)
	if err != nil {
		return nil, 0, err
	}
	var problems []problem
	found := links(string(data))
	for _, l := range found {
		if why := checkLink(root, file, string(data), l.target); why != "" {
			problems = append(problems, problem{filepath.ToSlash(rel), l.line, l.target, why})
		}
	}
	return problems, len(found), nil
}

// checkLink returns why one link destination of file (whose text is
// given) does not resolve, or "" if it does.
func checkLink(root, file, text, target string) string {
	if target == "" {
		return "empty destination"
	}
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
		u, err := url.Parse(target)
		switch {
		case err != nil:
			return fmt.Sprintf("malformed URL: %v", err)
		case u.Host == "" || strings.ContainsAny(target, " \t"):
			return "malformed URL: no host, or a space"
		}
		return ""
	}
	if strings.HasPrefix(target, "mailto:") {
		return ""
	}
	if regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`).MatchString(target) {
		return "a scheme other than http, https or mailto"
	}
	path, fragment, _ := strings.Cut(target, "#")
	if unescaped, err := url.PathUnescape(path); err == nil {
		path = unescaped
	}
	dest := file
	if path != "" {
		if strings.HasPrefix(path, "/") {
			return "an absolute path: use a path relative to the file"
		}
		dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
		if r, err := filepath.Rel(root, dest); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return "points outside the repository"
		}
		info, err := os.Stat(dest)
		if err != nil {
			return "no such file"
		}
		if info.IsDir() {
			if fragment != "" {
				return "a #fragment on a directory"
			}
			return ""
		}
		if fragment == "" {
			return ""
		}
		if !strings.HasSuffix(dest, ".md") {
			return "a #fragment on a file that is not markdown"
		}
		data, err := os.ReadFile(dest)
		if err != nil {
			return err.Error()
		}
		text = string(data)
	}
	if fragment == "" {
		return ""
	}
	if !anchors(text)[fragment] {
		return fmt.Sprintf("no heading in %s has the anchor #%s", filepath.Base(dest), fragment)
	}
	return ""
}
