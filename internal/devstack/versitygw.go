package devstack

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

const (
	// VersityGWEnv names the environment variable that, when set, holds
	// the path of the versitygw binary ([FindVersityGW]).
	VersityGWEnv = "FENCEGATE_VERSITYGW"
	// VersityGWVersion is the versitygw release that `make tools` builds.
	VersityGWVersion = "v1.8.0"
	// S3Region is the region of the S3 server and of its clients.
	S3Region = "us-east-1"

	// s3HealthPath is the health endpoint versitygw is told to serve.
	s3HealthPath = "/healthz"
	// s3ReadyTimeout bounds how long versitygw may take to be healthy.
	s3ReadyTimeout = 20 * time.Second
	// s3StartAttempts is how many times versitygw is started on a new
	// free port when the port picked was taken in the meantime.
	s3StartAttempts = 3
	// s3StopGrace is how long Close waits after SIGTERM before SIGKILL.
	s3StopGrace = 5 * time.Second
	// s3RequestTimeout bounds the S3 requests made here.
	s3RequestTimeout = 30 * time.Second
	// outputLimit bounds the child's output kept for error messages.
	outputLimit = 64 << 10
)

// buildHint says how to get the binary, for error messages.
const buildHint = "build it with `make tools` (GOBIN=$PWD/bin go install github.com/versity/versitygw/cmd/versitygw@" +
	VersityGWVersion + ") or set " + VersityGWEnv + " to its path"

// S3Config configures a versitygw server.
type S3Config struct {
	// Binary is the versitygw executable. Empty means [FindVersityGW].
	Binary string
	// Dir is the posix backend's root: each bucket is a directory in it.
	// It is created (mode 0700) if missing and reused if it holds data.
	// Required.
	Dir string
	// Port is the port on 127.0.0.1. Zero means a free port, picked at
	// start.
	Port int
	// AccessKey and SecretKey are the root credentials. Empty means
	// random ones, readable from the S3Server.
	AccessKey string
	SecretKey string
}

// S3Server is a versitygw S3 server running as a child process on
// 127.0.0.1 with the posix backend. Its methods are safe for concurrent
// use.
type S3Server struct {
	// AccessKey and SecretKey are the root credentials.
	AccessKey string
	SecretKey string
	// Region is the region that the server and its clients use.
	Region string

	addr string // 127.0.0.1:port
	child
	client *s3.Client
	// transport is the client's, closed by Close. Its zero Proxy means
	// that HTTP_PROXY is ignored: the server is on 127.0.0.1.
	transport *http.Transport
}

// StartVersityGW runs versitygw as a child process in its own process
// group, with the posix backend in cfg.Dir, and waits until its health
// endpoint answers 200 and it accepts the credentials (at most 20
// seconds). When cfg.Port is zero and the free port picked is taken before
// versitygw binds it, it tries again on a new port; when cfg.Port is taken,
// the error wraps [ErrAddrInUse]. The caller closes the S3Server.
func StartVersityGW(ctx context.Context, cfg S3Config) (*S3Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("start versitygw: no data directory")
	}
	if cfg.Binary == "" {
		bin, err := FindVersityGW()
		if err != nil {
			return nil, fmt.Errorf("start versitygw: %w", err)
		}
		cfg.Binary = bin
	}
	if (cfg.AccessKey == "") != (cfg.SecretKey == "") {
		return nil, errors.New("start versitygw: set both access key and secret key, or neither")
	}
	if cfg.AccessKey == "" {
		cfg.AccessKey, cfg.SecretKey = rand.Text(), rand.Text()
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	var lastErr error
	for range s3StartAttempts {
		s, err := startVersityGW(ctx, cfg)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if cfg.Port != 0 || ctx.Err() != nil ||
			!errors.Is(err, ErrAddrInUse) && !errors.Is(err, errNotOurServer) {
			break
		}
	}
	return nil, fmt.Errorf("start versitygw: %w", lastErr)
}

// errNotOurServer says that the server answering on the port rejects the
// credentials the child was started with: it is someone else's.
var errNotOurServer = errors.New("the server on the port is not the one started")

// startVersityGW makes one attempt at starting versitygw.
func startVersityGW(ctx context.Context, cfg S3Config) (*S3Server, error) {
	port := cfg.Port
	if err := fillFreePorts(&port); err != nil {
		return nil, err
	}
	s := newS3Server(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cfg.AccessKey, cfg.SecretKey)
	if err := s.launch(cfg.Binary, cfg.Dir); err != nil {
		s.transport.CloseIdleConnections()
		return nil, err
	}
	err := s.waitHealthy(ctx, "versitygw", s.addr, s.Endpoint()+s3HealthPath, s3ReadyTimeout)
	if err == nil {
		err = s.checkCredentials(ctx)
	}
	if err != nil {
		s.Close()
		if strings.Contains(s.output.String(), "address already in use") {
			err = fmt.Errorf("%w: %w", ErrAddrInUse, err)
		}
		return nil, err
	}
	return s, nil
}

// newS3Server returns an S3Server for addr (127.0.0.1:port) and the
// credentials, with its client, and no child process yet.
func newS3Server(addr, accessKey, secretKey string) *S3Server {
	s := &S3Server{
		AccessKey: accessKey,
		SecretKey: secretKey,
		Region:    S3Region,
		addr:      addr,
		child:     newChild(),
		transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second},
	}
	s.client = s3.New(s3.Options{
		Region:       S3Region,
		BaseEndpoint: aws.String(s.Endpoint()),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		HTTPClient:   &http.Client{Transport: s.transport},
	})
	return s
}

// launch starts the child process.
func (s *S3Server) launch(bin, dir string) error {
	cmd := exec.Command(bin,
		"--port", s.addr,
		"--quiet",
		"--health", s3HealthPath,
		"posix", dir,
	)
	cmd.Env = append(childEnv(os.Environ()),
		"ROOT_ACCESS_KEY="+s.AccessKey,
		"ROOT_SECRET_KEY="+s.SecretKey,
	)
	return s.run(cmd)
}

// checkCredentials lists buckets with the server's credentials, to make
// sure that the healthy server on the port is the child.
func (s *S3Server) checkCredentials(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s3RequestTimeout)
	defer cancel()
	_, err := s.client.ListBuckets(ctx, &s3.ListBucketsInput{MaxBuckets: aws.Int32(1)})
	if err == nil {
		return nil
	}
	// versitygw answers 404 XAdminUserNotFound to an unknown access key,
	// other servers 403 InvalidAccessKeyId or SignatureDoesNotMatch: any
	// 4xx answer means the server is not the child.
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) && respErr.HTTPStatusCode()/100 == 4 {
		return fmt.Errorf("versitygw on %s: %w: %v", s.addr, errNotOurServer, err)
	}
	return fmt.Errorf("versitygw on %s: list buckets: %w; output:\n%s", s.addr, err, s.output.String())
}

// Endpoint returns the server's base URL, http://127.0.0.1:PORT.
func (s *S3Server) Endpoint() string {
	return "http://" + s.addr
}

// CreateBucket creates the bucket name. A bucket that already exists is
// not an error: a server restarted on the same directory keeps its
// buckets.
func (s *S3Server) CreateBucket(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, s3RequestTimeout)
	defer cancel()
	_, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	if err == nil || bucketExists(err) {
		return nil
	}
	return fmt.Errorf("create bucket %q: %w", name, err)
}

// Close stops the child's process group: SIGTERM, then SIGKILL if it has
// not exited within 5 seconds. It waits until the child is reaped. Closing
// twice does nothing.
func (s *S3Server) Close() {
	s.transport.CloseIdleConnections()
	s.stop(s3StopGrace)
}

// bucketExists reports whether err answers CreateBucket for a bucket that
// already exists.
func bucketExists(err error) bool {
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	var apiErr smithy.APIError
	return errors.As(err, &owned) || errors.As(err, &exists) ||
		errors.As(err, &apiErr) && (apiErr.ErrorCode() == "BucketAlreadyOwnedByYou" || apiErr.ErrorCode() == "BucketAlreadyExists")
}

// FindVersityGW returns the path of the versitygw binary: the
// FENCEGATE_VERSITYGW environment variable if set, else versitygw next to
// the running executable, else bin/versitygw under the repository root
// (the nearest directory at or above the working directory that holds
// go.mod). The error says how to build it.
func FindVersityGW() (string, error) {
	return findTool("versitygw", VersityGWEnv, buildHint)
}

// findTool returns the path of the tool name, built into bin/ by make
// tools: the environment variable env if set, else name next to the
// running executable, else bin/name under the repository root (the
// nearest directory at or above the working directory that holds
// go.mod). The error names what was tried and ends with hint, which says
// how to build it.
func findTool(name, env, hint string) (string, error) {
	if path := os.Getenv(env); path != "" {
		if !isExecutableFile(path) {
			return "", fmt.Errorf("%s: %s=%s is not an executable file; %s", name, env, path, hint)
		}
		return path, nil
	}
	var tried []string
	if exe, err := os.Executable(); err == nil {
		path := filepath.Join(filepath.Dir(exe), name)
		if isExecutableFile(path) {
			return path, nil
		}
		tried = append(tried, path)
	}
	if root, err := repoRoot(); err == nil {
		path := filepath.Join(root, "bin", name)
		if isExecutableFile(path) {
			return path, nil
		}
		tried = append(tried, path)
	}
	return "", fmt.Errorf("%s not found (looked for %s, and %s is not set); %s",
		name, strings.Join(tried, ", "), env, hint)
}

// isExecutableFile reports whether path is a regular file with an execute
// bit set.
func isExecutableFile(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}

// repoRoot returns the nearest directory at or above the working directory
// that holds go.mod.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod at or above %s", wd)
		}
		dir = parent
	}
}

// childEnv returns env without the variables that would override the
// flags and credentials given to versitygw.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "VGW_") || strings.HasPrefix(name, "ROOT_") || name == "LOGFILE" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// tailBuffer keeps the last limit bytes written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

// Write appends p, dropping the oldest bytes beyond the limit.
func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// String returns what the buffer holds.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
