//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package devstack

import "os"

// lockFile opens path without locking it: on this system, two servers on
// one data directory are not detected.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}
