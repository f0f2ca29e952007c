package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	// FakeGCSEnv names the environment variable that, when set, holds the
	// path of the fake-gcs-server binary ([FindFakeGCS]).
	FakeGCSEnv = "FENCEGATE_FAKE_GCS"
	// FakeGCSVersion is the fake-gcs-server release that `make tools`
	// builds.
	FakeGCSVersion = "v1.56.1"

	// gcsHealthPath is fake-gcs-server's health endpoint.
	gcsHealthPath = "/_internal/healthcheck"
	// gcsReadyTimeout bounds how long fake-gcs-server may take to be
	// healthy.
	gcsReadyTimeout = 20 * time.Second
	// gcsStartAttempts is how many times fake-gcs-server is started on a
	// new free port when the port picked was taken in the meantime.
	gcsStartAttempts = 3
	// gcsRequestTimeout bounds CreateBucket.
	gcsRequestTimeout = 10 * time.Second
	// gcsStopGrace is how long Close waits after SIGTERM before SIGKILL.
	gcsStopGrace = 5 * time.Second
)

// fakeGCSBuildHint says how to get the binary, for error messages.
const fakeGCSBuildHint = "build it with `make tools` (GOBIN=$PWD/bin go install github.com/fsouza/fake-gcs-server@" +
	FakeGCSVersion + ") or set " + FakeGCSEnv + " to its path"

// GCSConfig configures a fake-gcs-server.
type GCSConfig struct {
	// Binary is the fake-gcs-server executable. Empty means
	// [FindFakeGCS].
	Binary string
	// Dir is the filesystem backend's root. It is created (mode 0700) if
	// missing. Required.
	Dir string
	// Port is the port on 127.0.0.1. Zero means a free port, picked at
	// start.
	Port int
}

// GCSServer is a fake-gcs-server (a Google Cloud Storage emulator)
// running as a child process on 127.0.0.1 over plain HTTP, with its
// filesystem backend. Clients reach it with STORAGE_EMULATOR_HOST set to
// [GCSServer.Host], or with its [GCSServer.Endpoint] and no
// authentication. Its methods are safe for concurrent use.
//
// Version v1.56.1 enforces ifGenerationMatch on uploads (simple,
// multipart and resumable) but not on deletes: see docs/gcs.md.
type GCSServer struct {
	addr string // 127.0.0.1:port
	child
}

// StartFakeGCS runs fake-gcs-server as a child process in its own process
// group, with the filesystem backend in cfg.Dir, and waits until its
// health endpoint answers 200 (at most 20 seconds). When cfg.Port is zero
// and the free port picked is taken before the server binds it, it tries
// again on a new port. The caller closes the GCSServer.
func StartFakeGCS(ctx context.Context, cfg GCSConfig) (*GCSServer, error) {
	if cfg.Dir == "" {
		return nil, errors.New("start fake-gcs-server: no data directory")
	}
	if cfg.Binary == "" {
		bin, err := FindFakeGCS()
		if err != nil {
			return nil, fmt.Errorf("start fake-gcs-server: %w", err)
		}
		cfg.Binary = bin
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("start fake-gcs-server: %w", err)
	}
	var lastErr error
	for range gcsStartAttempts {
		s, err := startFakeGCS(ctx, cfg)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if cfg.Port != 0 || ctx.Err() != nil || !errors.Is(err, ErrAddrInUse) {
			break
		}
	}
	return nil, fmt.Errorf("start fake-gcs-server: %w", lastErr)
}

// startFakeGCS makes one attempt at starting fake-gcs-server.
func startFakeGCS(ctx context.Context, cfg GCSConfig) (*GCSServer, error) {
	port := cfg.Port
	if err := fillFreePorts(&port); err != nil {
		return nil, err
	}
	s := &GCSServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), child: newChild()}
	cmd := exec.Command(cfg.Binary,
		"-scheme", "http",
		"-host", "127.0.0.1",
		"-port", strconv.Itoa(port),
		// Resumable uploads continue at the Location it answers, which
		// must be this address, not storage.googleapis.com.
		"-public-host", s.addr,
		"-external-url", s.baseURL(),
		"-backend", "filesystem",
		"-filesystem-root", filepath.Clean(cfg.Dir),
		"-log-level", "warn",
	)
	cmd.Env = gcsChildEnv(os.Environ())
	if err := s.run(cmd); err != nil {
		return nil, err
	}
	if err := s.waitHealthy(ctx, "fake-gcs-server", s.addr, s.baseURL()+gcsHealthPath, gcsReadyTimeout); err != nil {
		s.Close()
		if strings.Contains(s.output.String(), "address already in use") {
			err = fmt.Errorf("%w: %w", ErrAddrInUse, err)
		}
		return nil, err
	}
	return s, nil
}

// Host returns the server's address, 127.0.0.1:PORT: the value of
// STORAGE_EMULATOR_HOST for clients of it.
func (s *GCSServer) Host() string { return s.addr }

// baseURL is http://127.0.0.1:PORT.
func (s *GCSServer) baseURL() string { return "http://" + s.addr }

// Endpoint returns the base URL of the server's JSON API,
// http://127.0.0.1:PORT/storage/v1/.
func (s *GCSServer) Endpoint() string { return s.baseURL() + "/storage/v1/" }

// CreateBucket creates the bucket name (in the project "fencegate-dev",
// which the emulator does not check). A bucket that already exists is not
// an error: a server restarted on the same directory keeps its buckets.
func (s *GCSServer) CreateBucket(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, gcsRequestTimeout)
	defer cancel()
	body, err := json.Marshal(map[string]string{"name": name})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint()+"b?project=fencegate-dev", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("create bucket %q: %w", name, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusConflict {
		return nil
	}
	return fmt.Errorf("create bucket %q: %s: %s", name, resp.Status, bytes.TrimSpace(answer))
}

// Close stops the child's process group: SIGTERM, then SIGKILL if it has
// not exited within 5 seconds. It waits until the child is reaped. Closing
// twice does nothing.
func (s *GCSServer) Close() { s.stop(gcsStopGrace) }

// FindFakeGCS returns the path of the fake-gcs-server binary: the
// FENCEGATE_FAKE_GCS environment variable if set, else fake-gcs-server
// next to the running executable, else bin/fake-gcs-server under the
// repository root. The error says how to build it.
func FindFakeGCS() (string, error) {
	return findTool("fake-gcs-server", FakeGCSEnv, fakeGCSBuildHint)
}

// gcsChildEnv returns env without the FAKE_GCS_ variables, which would
// override the flags given to fake-gcs-server.
func gcsChildEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "FAKE_GCS_") {
			out = append(out, kv)
		}
	}
	return out
}
