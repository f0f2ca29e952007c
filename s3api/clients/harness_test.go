package clients_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/internal/testenv"
	"fencegate/internal/testenv/s3door"
	"fencegate/tokenstore"
)

// sharedS3 is one versitygw for the package; each test gets its own bucket.
var sharedS3 *testenv.S3

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithS3(m, &sharedS3))
}

// The clients' credentials: an S3 access key of the identity clients,
// whose grants cover the door's bucket.
const (
	accessKeyID = "AKIAFENCEGATECLIENTS"
	secretKey   = "clients-secret-wJalrXUtnFEMI-K7MDENG-bPxRfiCY"
)

var bucketSeq atomic.Int64

// door is the S3 front door, as fencegate serve wires it (s3door), on
// real etcd and the shared versitygw, over plain HTTP or HTTPS.
type door struct {
	endpoint string
	bucket   string
	store    *tokenstore.Store
	minio    *minio.Client // reads what landed in versitygw, not through the door
	gw       *gateway.Gateway
	// beforeComplete, when set, runs as a CompleteMultipartUpload request
	// arrives, before the door serves it: a test's way to let another
	// writer act at that moment.
	beforeComplete atomic.Pointer[func(key string)]
	// beforePart, when set, runs as an UploadPart request arrives, before
	// the door serves it, with the part's number as sent.
	beforePart atomic.Pointer[func(key, partNumber string)]
	// certFile is the PEM of the door's certificate over HTTPS (a client
	// trusts it), "" over plain HTTP.
	certFile string
}

func newDoor(t *testing.T) *door {
	t.Helper()
	return startDoor(t, false)
}

// newTLSDoor is newDoor over HTTPS: its certificate in d.certFile.
func newTLSDoor(t *testing.T) *door {
	t.Helper()
	return startDoor(t, true)
}

func startDoor(t *testing.T, overTLS bool) *door {
	t.Helper()
	d := &door{
		bucket: fmt.Sprintf("clients%d-%d", time.Now().UnixNano()%1e9, bucketSeq.Add(1)),
		minio:  sharedS3.Minio(t),
	}
	sharedS3.CreateBucket(t, d.bucket)
	wired := s3door.New(t, sharedS3, edge.Auth{
		Identities: []edge.Identity{{
			Name:   "clients",
			Grants: []edge.Grant{{Prefix: "s3/" + d.bucket + "/", Operations: []edge.Operation{edge.OpRead, edge.OpWrite, edge.OpDelete}}},
			S3Keys: []edge.S3Key{{AccessKeyID: accessKeyID, SecretAccessKey: secretKey}},
		}},
	})
	d.store, d.gw = wired.Store, wired.Gateway
	h := wired.Handler
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f := d.beforeComplete.Load(); f != nil && r.Method == http.MethodPost && r.URL.Query().Has("uploadId") {
			(*f)(strings.TrimPrefix(r.URL.Path, "/"+d.bucket+"/"))
		}
		if f := d.beforePart.Load(); f != nil && r.Method == http.MethodPut && r.URL.Query().Has("uploadId") {
			(*f)(strings.TrimPrefix(r.URL.Path, "/"+d.bucket+"/"), r.URL.Query().Get("partNumber"))
		}
		h.ServeHTTP(w, r)
	}))
	if overTLS {
		srv.StartTLS()
		d.certFile = filepath.Join(t.TempDir(), "door.pem")
		cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		if err := os.WriteFile(d.certFile, cert, 0o600); err != nil {
			t.Fatal(err)
		}
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	d.endpoint = srv.URL
	return d
}

// stored reads key straight from versitygw: its bytes and recorded fence
// token; ok false when absent.
func (d *door) stored(t *testing.T, key string) (body []byte, token string, ok bool) {
	t.Helper()
	return testenv.ReadStored(t, d.minio, d.bucket, key)
}

// mark returns key's high-water mark in etcd.
func (d *door) mark(t *testing.T, key string) api.Token {
	t.Helper()
	hwm, err := d.store.HighWaterMark(context.Background(), api.ObjectResource(d.bucket, key))
	if err != nil {
		t.Fatal(err)
	}
	return hwm
}

// client is one real S3 client, configured for a door. Each operation
// runs the client as a child process and returns what it printed
// (stdout and stderr) and its error (an *exec.ExitError for a non-zero
// exit).
type client struct {
	name string
	// put writes file to key with token in one PutObject.
	put func(key, file string, token int) (string, error)
	// upload writes file to key with token, split by the client into parts
	// of partMiB MiB (a multipart upload).
	upload func(key, file string, token, partMiB int) (string, error)
	// checksumUpload is upload with the client's ChecksumAlgorithm set
	// to algorithm (CRC32, SHA256, ...); nil for the clients
	// multipartchecksum_test.go does not run.
	checksumUpload func(key, file string, token, partMiB int, algorithm string) (string, error)
	// list lists the bucket's keys under prefix.
	list func(prefix string) (string, error)
	// readFrom reads key from byte first to the end (a ranged GET) and
	// returns the bytes.
	readFrom func(key string, first int64) ([]byte, string, error)
	// modTime is the modification time the client reads back for key
	// (rclone's, from the mtime metadata it writes), in UTC as
	// time.DateTime; nil for the others.
	modTime func(key string) (string, error)
	// metadata runs boto3's metadata round trip on key with token sent
	// as spelling ("metadata" or "header"; testdata/fencegate_boto3.py)
	// and returns the JSON it printed; nil for the others.
	metadata func(key, spelling string, token int) (string, error)
	// tags are the client's object tagging operations, the token sent
	// as X-Fence-Token, signed; nil for the clients tagging_test.go does
	// not run.
	tags *tagClient
}

// tagClient is a client's object tagging: PutObject with tags
// (x-amz-tagging, URL-encoded key=value pairs), PutObjectTagging,
// GetObjectTagging and DeleteObjectTagging. The writes send token in
// X-Fence-Token, signed.
type tagClient struct {
	putTagged func(key, file, tagging string, token int) (string, error)
	put       func(key string, tags map[string]string, token int) (string, error)
	// get returns the client's JSON of the tags: {"key": "value", ...}.
	get    func(key string) (map[string]string, string, error)
	delete func(key string, token int) (string, error)
}

// clientNames are the clients every test runs, each a subtest.
var clientNames = []string{"aws-cli", "rclone", "s3cmd", "boto3", "aws-sdk-js"}

// newClient returns the client name for d, failing the test with the
// make target that installs it when it is missing.
func newClient(t *testing.T, name string, d *door) client {
	t.Helper()
	dir := t.TempDir()
	run := func(env []string, bin string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append([]string{"HOME=" + dir, "PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	// runOut is run with stdout alone kept (the bytes a read wrote).
	runOut := func(env []string, bin string, args ...string) ([]byte, string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append([]string{"HOME=" + dir, "PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.Bytes(), stderr.String(), err
	}
	find := func(envName, fallback, target string) string {
		bin := os.Getenv(envName)
		if bin == "" {
			bin = fallback
		}
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s: %s not found: run `make %s` (or set %s)", name, bin, target, envName)
		}
		return bin
	}
	object := func(key string) string { return "s3://" + d.bucket + "/" + key }
	switch name {
	case "aws-cli":
		aws := find("FENCEGATE_AWSCLI", "/usr/bin/aws", "awscli")
		env := []string{"AWS_ACCESS_KEY_ID=" + accessKeyID, "AWS_SECRET_ACCESS_KEY=" + secretKey, "AWS_DEFAULT_REGION=us-east-1",
			"AWS_CONFIG_FILE=" + filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "credentials"),
			"AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER=", "AWS_MAX_ATTEMPTS=1"}
		awsRun := func(args ...string) (string, error) {
			return run(env, aws, append([]string{"--endpoint-url", d.endpoint}, args...)...)
		}
		return client{
			name: name,
			put: func(key, file string, token int) (string, error) {
				// aws s3 cp splits files over 8 MB unless told: one PutObject.
				cfg := "[default]\ns3 =\n    multipart_threshold = 5GB\n"
				if err := os.WriteFile(filepath.Join(dir, "config"), []byte(cfg), 0o600); err != nil {
					t.Fatal(err)
				}
				return awsRun("s3", "cp", file, object(key), "--metadata", fmt.Sprintf("fence-token=%d", token))
			},
			upload: func(key, file string, token, partMiB int) (string, error) {
				cfg := fmt.Sprintf("[default]\ns3 =\n    multipart_threshold = %dMB\n    multipart_chunksize = %dMB\n", partMiB, partMiB)
				if err := os.WriteFile(filepath.Join(dir, "config"), []byte(cfg), 0o600); err != nil {
					t.Fatal(err)
				}
				return awsRun("s3", "cp", file, object(key), "--metadata", fmt.Sprintf("fence-token=%d", token))
			},
			list: func(prefix string) (string, error) { return awsRun("s3", "ls", "--recursive", object(prefix)) },
			readFrom: func(key string, first int64) ([]byte, string, error) {
				out := filepath.Join(dir, "range.out")
				printed, err := awsRun("s3api", "get-object", "--bucket", d.bucket, "--key", key, "--range", fmt.Sprintf("bytes=%d-", first), out)
				b, _ := os.ReadFile(out)
				return b, printed, err
			},
			tags: awsCLITags(t, d, func(env []string, args ...string) (string, error) {
				return run(env, aws, append([]string{"--endpoint-url", d.endpoint}, args...)...)
			}, env, dir),
		}
	case "rclone":
		rclone := find("FENCEGATE_RCLONE", "/usr/bin/rclone", "rclone")
		env := []string{"RCLONE_CONFIG=" + filepath.Join(dir, "rclone.conf"),
			"RCLONE_CONFIG_FG_TYPE=s3", "RCLONE_CONFIG_FG_PROVIDER=Other", "RCLONE_CONFIG_FG_ENV_AUTH=false",
			"RCLONE_CONFIG_FG_ACCESS_KEY_ID=" + accessKeyID, "RCLONE_CONFIG_FG_SECRET_ACCESS_KEY=" + secretKey,
			"RCLONE_CONFIG_FG_ENDPOINT=" + d.endpoint, "RCLONE_CONFIG_FG_REGION=us-east-1",
			"RCLONE_CONFIG_FG_FORCE_PATH_STYLE=true", "RCLONE_CONFIG_FG_NO_CHECK_BUCKET=true"}
		remote := func(key string) string { return "fg:" + d.bucket + "/" + key }
		// One try: a refusal is final, and the test reads the first answer.
		once := []string{"--retries", "1", "--low-level-retries", "1"}
		return client{
			name: name,
			put: func(key, file string, token int) (string, error) {
				return run(env, rclone, append([]string{"copyto", file, remote(key), "--ignore-times", "--s3-upload-cutoff", "1G",
					"--header-upload", fmt.Sprintf("X-Amz-Meta-Fence-Token: %d", token)}, once...)...)
			},
			upload: func(key, file string, token, partMiB int) (string, error) {
				part := fmt.Sprintf("%dM", partMiB)
				return run(env, rclone, append([]string{"copyto", file, remote(key), "--ignore-times", "--s3-upload-cutoff", part, "--s3-chunk-size", part,
					"--header-upload", fmt.Sprintf("X-Amz-Meta-Fence-Token: %d", token)}, once...)...)
			},
			list: func(prefix string) (string, error) {
				return run(env, rclone, append([]string{"lsf", "-R", "fg:" + d.bucket + "/" + prefix}, once...)...)
			},
			readFrom: func(key string, first int64) ([]byte, string, error) {
				return runOut(env, rclone, append([]string{"cat", remote(key), "--offset", fmt.Sprint(first)}, once...)...)
			},
			modTime: func(key string) (string, error) {
				out, printed, err := runOut(append(env, "TZ=UTC"), rclone, append([]string{"lsf", "--format", "t", remote(key)}, once...)...)
				if err != nil {
					return printed, err
				}
				return strings.TrimSpace(string(out)), nil
			},
		}
	case "s3cmd":
		s3cmd := find("FENCEGATE_S3CMD", "/usr/bin/s3cmd", "s3cmd")
		host := strings.TrimPrefix(d.endpoint, "http://")
		cfgFile := filepath.Join(dir, "s3cfg")
		cfg := "[default]\naccess_key = " + accessKeyID + "\nsecret_key = " + secretKey + "\nhost_base = " + host + "\nhost_bucket = " + host +
			"\nuse_https = False\nsignature_v2 = False\nbucket_location = us-east-1\nmax_retries = 1\n"
		if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		s3cmdRun := func(args ...string) (string, error) {
			return run(nil, s3cmd, append([]string{"-c", cfgFile}, args...)...)
		}
		return client{
			name: name,
			put: func(key, file string, token int) (string, error) {
				return s3cmdRun("put", "--disable-multipart", file, object(key), fmt.Sprintf("--add-header=x-amz-meta-fence-token:%d", token))
			},
			upload: func(key, file string, token, partMiB int) (string, error) {
				return s3cmdRun("put", fmt.Sprintf("--multipart-chunk-size-mb=%d", partMiB), file, object(key), fmt.Sprintf("--add-header=x-amz-meta-fence-token:%d", token))
			},
			list: func(prefix string) (string, error) { return s3cmdRun("ls", "--recursive", object(prefix)) },
			readFrom: func(key string, first int64) ([]byte, string, error) {
				// get --continue resumes a partial download with a ranged
				// GET from the local file's length. The local part is zeros,
				// not the object's bytes: a whole download would show.
				local := filepath.Join(dir, "partial")
				if err := os.WriteFile(local, make([]byte, first), 0o600); err != nil {
					t.Fatal(err)
				}
				printed, err := s3cmdRun("get", "--continue", object(key), local)
				b, _ := os.ReadFile(local)
				if !bytes.Equal(b[:min(int64(len(b)), first)], make([]byte, min(int64(len(b)), first))) {
					return nil, printed, fmt.Errorf("s3cmd get --continue overwrote the local part: not a ranged read")
				}
				return b[min(int64(len(b)), first):], printed, err
			},
		}
	case "boto3":
		python := find("FENCEGATE_PYTHON3", "/usr/bin/python3", "boto3")
		if out, err := exec.Command(python, "-c", "import boto3").CombinedOutput(); err != nil {
			t.Fatalf("boto3: %s cannot import boto3: run `make boto3` (or set FENCEGATE_PYTHON3): %v\n%s", python, err, out)
		}
		script, err := filepath.Abs(filepath.Join("testdata", "fencegate_boto3.py"))
		if err != nil {
			t.Fatal(err)
		}
		env := []string{"FENCEGATE_S3_ENDPOINT=" + d.endpoint, "AWS_ACCESS_KEY_ID=" + accessKeyID, "AWS_SECRET_ACCESS_KEY=" + secretKey,
			"AWS_CONFIG_FILE=" + filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "credentials"), "AWS_EC2_METADATA_DISABLED=true"}
		return client{
			name: name,
			put: func(key, file string, token int) (string, error) {
				return run(env, python, script, "put", d.bucket, key, file, fmt.Sprint(token))
			},
			upload: func(key, file string, token, partMiB int) (string, error) {
				return run(env, python, script, "upload", d.bucket, key, file, fmt.Sprint(token), fmt.Sprint(partMiB<<20))
			},
			checksumUpload: func(key, file string, token, partMiB int, algorithm string) (string, error) {
				return run(env, python, script, "upload-checksum", d.bucket, key, file, fmt.Sprint(token), fmt.Sprint(partMiB<<20), algorithm)
			},
			list: func(prefix string) (string, error) { return run(env, python, script, "list", d.bucket, prefix) },
			readFrom: func(key string, first int64) ([]byte, string, error) {
				return runOut(env, python, script, "range", d.bucket, key, fmt.Sprint(first), "")
			},
			metadata: func(key, spelling string, token int) (string, error) {
				out, printed, err := runOut(env, python, script, "metadata", d.bucket, key, spelling, fmt.Sprint(token))
				if err != nil {
					return printed, err
				}
				return string(out), nil
			},
			tags: boto3Tags(d, func(token int, args ...string) ([]byte, string, error) {
				return runOut(append(env, fmt.Sprintf("FENCEGATE_FENCE_TOKEN=%d", token)), python, append([]string{script}, args...)...)
			}),
		}
	case "aws-sdk-js":
		return awsJSClient(t, d) // awsjs_test.go
	}
	t.Fatalf("unknown client %q", name)
	return client{}
}

// writeFile writes size bytes of a pattern seeded by seed to a file in
// dir and returns its name and bytes.
func writeFile(t *testing.T, dir, name string, size int, seed string) (string, []byte) {
	t.Helper()
	b := make([]byte, size)
	block := sha256.Sum256([]byte(seed))
	for i := 0; i < size; i += len(block) {
		copy(b[i:], block[:])
		block = sha256.Sum256(block[:])
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, b
}
