package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"fencegate/internal/config"
)

func TestAuthHashKey(t *testing.T) {
	sum := sha256.Sum256([]byte("k3y-Of-ci"))
	want := "sha256:" + hex.EncodeToString(sum[:]) + "\n"
	tests := []struct {
		name    string
		args    []string
		stdin   string
		want    string // on stdout
		wantErr string
	}{
		{"key with newline", []string{"hash-key"}, "k3y-Of-ci\n", want, ""},
		{"key with CRLF", []string{"hash-key"}, "k3y-Of-ci\r\n", want, ""},
		{"key without newline", []string{"hash-key"}, "k3y-Of-ci", want, ""},
		{"only the first line", []string{"hash-key"}, "k3y-Of-ci\nsecond line\n", want, ""},
		{"no key", []string{"hash-key"}, "", "", "no key on stdin"},
		{"empty line", []string{"hash-key"}, "\n", "", "no key on stdin"},
		{"key with a space", []string{"hash-key"}, "two words\n", "", "spaces or control characters"},
		{"key too long", []string{"hash-key"}, strings.Repeat("k", maxAPIKeyBytes+1), "", "longer than"},
		{"key on the command line", []string{"hash-key", "k3y-Of-ci"}, "", "", "never from the command line"},
		{"no subcommand", nil, "", "", "want a subcommand"},
		{"unknown subcommand", []string{"new-key"}, "", "", `unknown subcommand "new-key"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout bytes.Buffer
			err := runAuth(tt.args, strings.NewReader(tt.stdin), &stdout)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, new(*usageError)) {
					t.Fatalf("runAuth(%q) = %v; want a usage error containing %q", tt.args, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "k3y-Of-ci") || strings.Contains(err.Error(), "two words") {
					t.Errorf("runAuth(%q) = %v: the key is in the message", tt.args, err)
				}
				return
			}
			if err != nil || stdout.String() != tt.want {
				t.Fatalf("runAuth(%q) = %v, printed %q; want %q", tt.args, err, stdout.String(), tt.want)
			}
			// What it prints is what the config file takes.
			parsed, err := config.ParseKeyHash(strings.TrimSpace(stdout.String()))
			if err != nil || parsed != sum {
				t.Errorf("config.ParseKeyHash(%q) = %x, %v; want %x", stdout.String(), parsed, err, sum)
			}
		})
	}
}
