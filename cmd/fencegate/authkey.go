package main

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"

	"fencegate/internal/config"
)

const authUsage = `Usage: fencegate auth hash-key < KEYFILE

Read an API key from stdin (one line) and print its hash, sha256:<hex>, for
the config file's auth.identities[].api_keys. The config file holds only
hashes: clients send the key itself (Authorization: Bearer KEY), and the
gateway compares its hash.

  head -c 32 /dev/urandom | base64 | tr -d '=+/' > ci.key   # a new key
  fencegate auth hash-key < ci.key                          # sha256:...
`

// maxAPIKeyBytes bounds an API key (it travels in a header).
const maxAPIKeyBytes = 4 << 10

// runAuth is `fencegate auth`: only `hash-key` for now.
func runAuth(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return usageErrorf("auth: want a subcommand: hash-key (see fencegate auth -h)")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, authUsage)
		return nil
	case "hash-key":
	default:
		return usageErrorf("auth: unknown subcommand %q (want hash-key)", args[0])
	}
	if len(args) > 1 {
		if args[1] == "-h" || args[1] == "--help" {
			fmt.Fprint(stdout, authUsage)
			return nil
		}
		// The argument is not repeated: it may be the key.
		return usageErrorf("auth hash-key: unexpected argument: the key is read from stdin, never from the command line")
	}
	key, err := readAPIKey(stdin)
	if err != nil {
		return &usageError{Err: fmt.Errorf("auth hash-key: %w", err)}
	}
	fmt.Fprintln(stdout, hashAPIKey(key))
	return nil
}

// readAPIKey reads one line from r: the key, without its line ending. A
// key must be a valid bearer token as clients send it: no spaces or
// control characters.
func readAPIKey(r io.Reader) (string, error) {
	line, err := bufio.NewReaderSize(io.LimitReader(r, maxAPIKeyBytes+2), maxAPIKeyBytes+2).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the key from stdin: %w", err)
	}
	key := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	switch {
	case key == "":
		return "", errors.New("no key on stdin (pipe it in: fencegate auth hash-key < KEYFILE)")
	case len(key) > maxAPIKeyBytes:
		return "", fmt.Errorf("the key is longer than %d bytes", maxAPIKeyBytes)
	case strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return "", errors.New("the key has spaces or control characters, which a bearer key cannot carry")
	}
	return key, nil
}

// hashAPIKey returns sha256:<hex> of key, as the config file stores it.
func hashAPIKey(key string) string {
	return config.KeyHash(sha256.Sum256([]byte(key)))
}
