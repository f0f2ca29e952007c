package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"fencegate/internal/testenv"
)

// awsCLI returns Debian's aws (make awscli installs it), or the one
// FENCEGATE_AWSCLI names.
func awsCLI(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("FENCEGATE_AWSCLI")
	if bin == "" {
		bin = "/usr/bin/aws"
	}
	if _, err := exec.LookPath(bin); err != nil {
		t.Fatalf("no aws CLI at %s: run `make awscli` (Debian's awscli package) or set FENCEGATE_AWSCLI", bin)
	}
	return bin
}

// TestDevS3API: dev serves the S3 API and prints an aws-cli session for
// it with its own key; pasted into sh as a user would, the write with the
// printed token is accepted, the older token is refused (aws exits
// non-zero and prints StaleFenceToken), the read prints the first
// write's bytes, and the REST API shows the high-water mark.
func TestDevS3API(t *testing.T) {
	aws := awsCLI(t)
	addr, s3Addr := freeAddr(t), freeAddr(t)
	base := "http://" + addr
	r := startRun(t, "dev", "--listen", addr, "--s3-listen", s3Addr, "--data", filepath.Join(t.TempDir(), "data"), "--log-level", "warn")
	r.waitReady(t, base)
	out := r.waitOutput(t, "Ctrl-C stops everything")
	for _, want := range []string{
		"S3 API   http://" + s3Addr + "  (region us-east-1; access key fencegate-dev-s3, secret key fencegate-dev-s3-secret)",
		"The high-water mark of s3/dev/hello.txt is 0.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dev printed:\n%s\nwant it to contain %q", out, want)
		}
	}
	var lines []string
	for line := range strings.Lines(out) {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "echo ") || strings.HasPrefix(line, "AWS_ACCESS_KEY_ID=") {
			lines = append(lines, line)
		}
	}
	want := []string{
		"echo 'hello from 5' > hello.txt",
		"AWS_ACCESS_KEY_ID=fencegate-dev-s3 AWS_SECRET_ACCESS_KEY=fencegate-dev-s3-secret aws --endpoint-url http://" + s3Addr + " --region us-east-1 s3 cp hello.txt s3://dev/hello.txt --metadata fence-token=5",
		"AWS_ACCESS_KEY_ID=fencegate-dev-s3 AWS_SECRET_ACCESS_KEY=fencegate-dev-s3-secret aws --endpoint-url http://" + s3Addr + " --region us-east-1 s3 cp hello.txt s3://dev/hello.txt --metadata fence-token=4",
		"AWS_ACCESS_KEY_ID=fencegate-dev-s3 AWS_SECRET_ACCESS_KEY=fencegate-dev-s3-secret aws --endpoint-url http://" + s3Addr + " --region us-east-1 s3 cp s3://dev/hello.txt -",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("dev printed the S3 commands\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// Run them with sh, aws on the PATH, and no configuration of the user's.
	dir, binDir := t.TempDir(), t.TempDir()
	if err := os.Symlink(aws, filepath.Join(binDir, "aws")); err != nil {
		t.Fatal(err)
	}
	sh := func(line string) (string, error) {
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "PATH=" + binDir + ":/usr/bin:/bin", "AWS_CONFIG_FILE=" + filepath.Join(dir, "none"),
			"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none"), "AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER="}
		got, err := cmd.CombinedOutput()
		return string(got), err
	}
	for i, line := range lines[:2] {
		if got, err := sh(line); err != nil {
			t.Fatalf("command %d %q: %v\n%s", i, line, err, got)
		}
	}
	got, err := sh(lines[2])
	if exit := new(exec.ExitError); !errors.As(err, &exit) || exit.ExitCode() == 0 || !strings.Contains(got, "StaleFenceToken") {
		t.Errorf("the stale write %q: %v\n%s\nwant a non-zero exit and StaleFenceToken", lines[2], err, got)
	}
	if got, err := sh(lines[3]); err != nil || got != "hello from 5\n" {
		t.Errorf("the read %q = %q, %v; want \"hello from 5\\n\"", lines[3], got, err)
	}
	if res := goCurl(t, "curl -s "+base+"/v1/fences/s3/dev/hello.txt"); strings.TrimSpace(res.body) != `{"resource":"s3/dev/hello.txt","high_water_mark":5}` {
		t.Errorf("the mark after the S3 session: %s; want 5", res.body)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("dev after cancellation = %v; want nil", err)
	}
	if !listenerClosed(s3Addr) {
		t.Error("the S3 API still listens after dev returned")
	}
}

// s3APIConfig writes a config file whose identity etl may write s3/etl/
// with the S3 access key etl-key, its secret in a file next to it. etl
// has an API key too (of the key etl-rest-key): the front door finds an
// identity by the REST credentials that name it (gateway.identityNamed).
func s3APIConfig(t *testing.T) (path, secret string) {
	t.Helper()
	dir := t.TempDir()
	secret = "etl-secret-wJalrXUtnFEMI-K7MDENG"
	if err := os.WriteFile(filepath.Join(dir, "etl.secret"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "fencegate.yaml")
	data := `auth:
  identities:
    - name: etl
      grants: [{prefix: s3/etl/, operations: [read, write, delete]}]
      s3_keys: [{access_key_id: etl-key, secret_file: etl.secret}]
      api_keys: ["sha256:` + fmt.Sprintf("%x", sha256.Sum256([]byte("etl-rest-key"))) + `"]
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, secret
}

// s3Client is an aws-sdk-go-v2 client of the S3 API at endpoint.
func s3Client(endpoint, id, secret string, httpClient *http.Client) *s3.Client {
	o := s3.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(id, secret, ""),
		Retryer:      aws.NopRetryer{},
	}
	if httpClient != nil { // a nil *http.Client in the interface would be called
		o.HTTPClient = httpClient
	}
	return s3.New(o)
}

// putToken is a PutObject with the fence token in the object's metadata,
// as `aws s3 cp --metadata fence-token=N` sends it.
func putToken(ctx context.Context, c *s3.Client, bucket, key, body string, token int) error {
	_, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body),
		Metadata: map[string]string{"fence-token": fmt.Sprint(token)},
	})
	return err
}

// errorCode is the S3 error code of err, "" for none.
func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// TestServeS3API: serve with --s3-listen serves the S3 API beside the
// REST API, with the config file's S3 keys: a write with token 7 is
// accepted, 6 then refused with StaleFenceToken, a wrong secret with
// SignatureDoesNotMatch; the REST API reads token 7's bytes. On shutdown
// the S3 API drains like the REST API: a PUT in flight on it finishes
// (200) after the listener closed, and serve returns nil.
func TestServeS3API(t *testing.T) {
	st := startStack(t, "etl")
	path, secret := s3APIConfig(t)
	addr, s3Addr := freeAddr(t), freeAddr(t)
	base, s3Base := "http://"+addr, "http://"+s3Addr
	r := startRun(t, st.serveArgs(addr, "--config", path, "--s3-listen", s3Addr, "--drain-delay", "300ms")...)
	r.waitReady(t, base)
	ctx := t.Context()
	c := s3Client(s3Base, "etl-key", secret, nil)

	if err := putToken(ctx, c, "etl", "day-1", "seven", 7); err != nil {
		t.Fatalf("PutObject token 7: %v", err)
	}
	if err := putToken(ctx, c, "etl", "day-1", "six", 6); errorCode(err) != "StaleFenceToken" {
		t.Fatalf("PutObject token 6 after 7: %v; want StaleFenceToken", err)
	}
	if err := putToken(ctx, s3Client(s3Base, "etl-key", secret+"x", nil), "etl", "day-1", "eight", 8); errorCode(err) != "SignatureDoesNotMatch" {
		t.Fatalf("PutObject with a wrong secret: %v; want SignatureDoesNotMatch", err)
	}
	if res := goCurl(t, "curl -s "+base+"/v1/fences/s3/etl/day-1"); res.status != http.StatusUnauthorized {
		t.Errorf("REST API without a key: %d; want 401: an S3 key is no REST credential", res.status)
	}
	if res := goCurl(t, "curl -s -H 'Authorization: Bearer etl-rest-key' "+base+"/v1/fences/s3/etl/day-1"); !strings.Contains(res.body, `"high_water_mark":7`) {
		t.Errorf("the mark after the S3 writes: %d %s; want 7", res.status, res.body)
	}
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("etl")})
	if err != nil || len(list.Contents) != 1 || aws.ToString(list.Contents[0].Key) != "day-1" {
		t.Errorf("ListObjectsV2 = %+v, %v; want day-1 (listings go through the gateway's S3 client)", list, err)
	}
	obj, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("etl"), Key: aws.String("day-1")})
	if err != nil {
		t.Fatalf("GetObject: %v", err)
	}
	got, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if string(got) != "seven" || obj.Metadata["fence-token"] != "7" {
		t.Errorf("GetObject = %q, fence-token %q; want \"seven\", 7", got, obj.Metadata["fence-token"])
	}

	// A PUT whose body is half sent when the shutdown starts, signed by
	// the SDK's signer (UNSIGNED-PAYLOAD: the body is not read to sign).
	body, rest := io.Pipe()
	req, err := http.NewRequest(http.MethodPut, s3Base+"/etl/slow", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 10
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	req.Header.Set("X-Amz-Meta-Fence-Token", "9")
	if err := v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: "etl-key", SecretAccessKey: secret}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
			}
		}
		done <- err
	}()
	if _, err := rest.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	r.cancel() // as SIGTERM does
	testenv.WaitUntil(t, 30*time.Second, "the S3 API's listener is closed", func() bool { return listenerClosed(s3Addr) })
	select {
	case err := <-r.done:
		t.Fatalf("serve returned (%v) while a request was in flight on the S3 API", err)
	default:
	}
	if _, err := rest.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	rest.Close()
	if err := <-done; err != nil {
		t.Fatalf("PutObject in flight during the shutdown: %v; want it to finish", err)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("serve after a graceful shutdown = %v; want nil", err)
	}
}

// TestServeS3APIWithTLS: with --tls-cert and --tls-key the S3 API is
// served over TLS with the same certificate as the REST API.
func TestServeS3APIWithTLS(t *testing.T) {
	st := startStack(t, "etl")
	path, secret := s3APIConfig(t)
	certs, err := filepath.Abs(filepath.Join("testdata", "config", "good", "certs"))
	if err != nil {
		t.Fatal(err)
	}
	addr, s3Addr := freeAddr(t), freeAddr(t)
	r := startRun(t, st.serveArgs(addr, "--config", path, "--s3-listen", s3Addr,
		"--tls-cert", filepath.Join(certs, "server.crt"), "--tls-key", filepath.Join(certs, "server.key"))...)
	ca, err := os.ReadFile(filepath.Join(certs, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	testenv.WaitUntil(t, 60*time.Second, "the S3 API answers over TLS", func() bool {
		resp, err := httpClient.Get("https://" + s3Addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	c := s3Client("https://"+s3Addr, "etl-key", secret, httpClient)
	if err := putToken(t.Context(), c, "etl", "tls", "over tls", 3); err != nil {
		t.Fatalf("PutObject over TLS: %v", err)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("serve = %v; want nil", err)
	}
}

// TestServeS3APIIdentityWithS3KeysOnly: an identity whose only credential
// is an S3 access key (valid: docs/configuration.md, "S3 access keys")
// writes through the S3 API as that identity, with its grants; the REST
// API authenticates no one as it (401).
func TestServeS3APIIdentityWithS3KeysOnly(t *testing.T) {
	st := startStack(t, "etl")
	dir := t.TempDir()
	const secret = "etl-only-secret-wJalrXUtnFEMI"
	if err := os.WriteFile(filepath.Join(dir, "etl.secret"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fencegate.yaml")
	data := `auth:
  identities:
    - name: etl
      grants: [{prefix: s3/etl/, operations: [read, write]}]
      s3_keys: [{access_key_id: etl-only, secret_file: etl.secret}]
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, s3Addr := freeAddr(t), freeAddr(t)
	r := startRun(t, st.serveArgs(addr, "--config", path, "--s3-listen", s3Addr)...)
	r.waitReady(t, "http://"+addr)
	c := s3Client("http://"+s3Addr, "etl-only", secret, nil)
	if err := putToken(t.Context(), c, "etl", "k", "two", 2); err != nil {
		t.Errorf("PutObject as an identity with only an S3 key: %v; want it accepted", err)
	}
	if err := putToken(t.Context(), c, "other", "k", "two", 2); errorCode(err) != "AccessDenied" {
		t.Errorf("PutObject outside the identity's grants: %v; want AccessDenied", err)
	}
	if res := goCurl(t, "curl -s http://"+addr+"/v1/fences/s3/etl/k"); res.status != http.StatusUnauthorized {
		t.Errorf("REST API: %d; want 401", res.status)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("serve = %v; want nil", err)
	}
}
