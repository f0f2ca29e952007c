package sigv4_test

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"fencegate/s3api/sigv4"
)

// AWSCLIEnv names the aws binary TestAWSCLI runs; unset, it runs Debian's
// /usr/bin/aws (make awscli installs it) and any other aws on the PATH.
const AWSCLIEnv = "FENCEGATE_AWSCLI"

func awsBinaries(t *testing.T) []string {
	t.Helper()
	if p := os.Getenv(AWSCLIEnv); p != "" {
		return []string{p}
	}
	var bins []string
	seen := map[string]bool{}
	for _, p := range []string{"/usr/bin/aws", "aws"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		// Resolve shims (pyenv) to tell binaries apart by version.
		out, err := exec.Command(path, "--version").CombinedOutput()
		if err != nil || seen[string(out)] {
			continue
		}
		seen[string(out)] = true
		bins = append(bins, path)
	}
	if len(bins) == 0 {
		t.Fatalf("no aws CLI: run `make awscli` (Debian's awscli package) or set %s", AWSCLIEnv)
	}
	return bins
}

// TestAWSCLI runs the real aws command-line client against a server that
// verifies with this package: put-object, `aws s3 cp` (an upload), get-object
// and `aws s3 presign` are accepted, with the exact bytes; a wrong secret is
// refused and the client prints SignatureDoesNotMatch and exits non-zero.
func TestAWSCLI(t *testing.T) {
	for _, bin := range awsBinaries(t) {
		version, _ := exec.Command(bin, "--version").CombinedOutput()
		for _, tls := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tls=%v", strings.Fields(string(version))[0], tls), func(t *testing.T) {
				s := newS3Server(t, tls, sigv4.Config{Region: testRegion})
				dir := t.TempDir()
				env := []string{
					"HOME=" + dir,
					"PATH=" + os.Getenv("PATH"),
					"AWS_CONFIG_FILE=" + filepath.Join(dir, "config"),
					"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "credentials"),
					"AWS_ACCESS_KEY_ID=" + testAccessKey,
					"AWS_DEFAULT_REGION=" + testRegion,
					"AWS_EC2_METADATA_DISABLED=true",
					"AWS_PAGER=",
				}
				// aws-cli v1 presigns with Signature Version 2 unless told.
				os.WriteFile(filepath.Join(dir, "config"), []byte("[default]\ns3 =\n    signature_version = s3v4\n"), 0o600)
				if tls {
					ca := filepath.Join(dir, "ca.pem")
					os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o600)
					env = append(env, "AWS_CA_BUNDLE="+ca)
				}
				aws := func(secret string, args ...string) (string, error) {
					cmd := exec.Command(bin, append([]string{"--endpoint-url", s.URL}, args...)...)
					cmd.Env = append(env, "AWS_SECRET_ACCESS_KEY="+secret)
					out, err := cmd.CombinedOutput()
					return string(out), err
				}
				payload := testPayload(1 << 20)
				file := filepath.Join(dir, "payload")
				os.WriteFile(file, payload, 0o600)

				checkPut := func(what, out string, err error) {
					t.Helper()
					o := s.last(t)
					if err != nil {
						t.Fatalf("%s: %v\n%s(server: %v)", what, err, out, o.Err)
					}
					if !o.Complete || !bytes.Equal(o.Body, payload) {
						t.Fatalf("%s: verified body complete=%v, %d bytes; want the %d bytes", what, o.Complete, len(o.Body), len(payload))
					}
					t.Logf("%s: x-amz-content-sha256=%s checksum=%q", what, o.ContentSHA256, o.Checksum)
				}
				out, err := aws(testSecret, "s3api", "put-object", "--bucket", "bucket", "--key", "dir/a b+c.txt", "--body", file, "--metadata", "fence-token=33")
				checkPut("s3api put-object", out, err)
				out, err = aws(testSecret, "s3", "cp", file, "s3://bucket/dir/copied file.bin", "--metadata", "fence-token=34")
				checkPut("s3 cp", out, err)

				got := filepath.Join(dir, "got")
				if out, err := aws(testSecret, "s3api", "get-object", "--bucket", "bucket", "--key", "dir/a b+c.txt", got); err != nil {
					t.Fatalf("get-object: %v\n%s(server: %v)", err, out, s.last(t).Err)
				}
				if b, _ := os.ReadFile(got); !bytes.Equal(b, payload) {
					t.Fatalf("get-object wrote %d bytes; want the object", len(b))
				}

				out, err = aws(testSecret, "s3", "presign", "s3://bucket/dir/a b+c.txt", "--expires-in", "300")
				if err != nil {
					t.Fatalf("presign: %v\n%s", err, out)
				}
				resp, err := s.Client().Get(strings.TrimSpace(out))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !bytes.Equal(b, payload) {
					t.Fatalf("presigned GET: %d, %d bytes (server: %v); want 200 and the object", resp.StatusCode, len(b), s.last(t).Err)
				}

				out, err = aws("wrong-secret", "s3api", "put-object", "--bucket", "bucket", "--key", "refused", "--body", file)
				if err == nil || !strings.Contains(out, "SignatureDoesNotMatch") {
					t.Fatalf("wrong secret: exit %v, output %q; want a failure naming SignatureDoesNotMatch", err, out)
				}
				if o := s.last(t); o.Complete || o.Code != "SignatureDoesNotMatch" {
					t.Fatalf("wrong secret: server code %q complete=%v", o.Code, o.Complete)
				}
			})
		}
	}
}
