package clients_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"
)

// awsCLITags is aws-cli's object tagging (aws s3api put-object --tagging,
// put-object-tagging, get-object-tagging, delete-object-tagging). aws-cli
// cannot add a header by itself: the plugin of testdata/awscli-plugin,
// registered with aws configure set in a config file of its own (the
// other operations write theirs over), adds X-Fence-Token from
// FENCEGATE_FENCE_TOKEN before each request is signed. run runs aws
// against d with env and args.
func awsCLITags(t *testing.T, d *door, run func(env []string, args ...string) (string, error), env []string, dir string) *tagClient {
	pluginDir, err := filepath.Abs(filepath.Join("testdata", "awscli-plugin"))
	if err != nil {
		t.Fatal(err)
	}
	env = append(slices.Clone(env), "AWS_CONFIG_FILE="+filepath.Join(dir, "tagging-config"), "PYTHONDONTWRITEBYTECODE=1")
	var configure sync.Once
	aws := func(token int, args ...string) (string, error) {
		configure.Do(func() {
			for _, kv := range [][2]string{{"plugins.cli_legacy_plugin_path", pluginDir}, {"plugins.fencegate", "fencegate_fence_token"}} {
				if out, err := run(env, "configure", "set", kv[0], kv[1]); err != nil {
					t.Fatalf("aws configure set %s: %v\n%s", kv[0], err, out)
				}
			}
		})
		callEnv := env
		if token != 0 {
			callEnv = append(slices.Clone(env), fmt.Sprintf("FENCEGATE_FENCE_TOKEN=%d", token))
		}
		return run(callEnv, args...)
	}
	object := func(op, key string, args ...string) []string {
		return append([]string{"s3api", op, "--bucket", d.bucket, "--key", key}, args...)
	}
	return &tagClient{
		putTagged: func(key, file, tagging string, token int) (string, error) {
			return aws(token, object("put-object", key, "--body", file, "--tagging", tagging)...)
		},
		put: func(key string, tags map[string]string, token int) (string, error) {
			type tag struct{ Key, Value string }
			var set struct{ TagSet []tag }
			for _, k := range slices.Sorted(maps.Keys(tags)) {
				set.TagSet = append(set.TagSet, tag{k, tags[k]})
			}
			doc, err := json.Marshal(set)
			if err != nil {
				t.Fatal(err)
			}
			return aws(token, object("put-object-tagging", key, "--tagging", string(doc))...)
		},
		get: func(key string) (map[string]string, string, error) {
			out, err := aws(0, object("get-object-tagging", key, "--output", "json")...)
			if err != nil {
				return nil, out, err
			}
			var set struct{ TagSet []struct{ Key, Value string } }
			if err := json.Unmarshal([]byte(out), &set); err != nil {
				return nil, out, err
			}
			tags := map[string]string{}
			for _, tg := range set.TagSet {
				tags[tg.Key] = tg.Value
			}
			return tags, out, nil
		},
		delete: func(key string, token int) (string, error) {
			return aws(token, object("delete-object-tagging", key)...)
		},
	}
}

// boto3Tags is boto3's object tagging (testdata/fencegate_boto3.py's
// put-tagged, put-tagging, get-tagging, delete-tagging), the token sent
// in X-Fence-Token by a before-sign.s3 handler. run runs the script with
// FENCEGATE_FENCE_TOKEN set to token and args, returning its stdout and
// stderr.
func boto3Tags(d *door, run func(token int, args ...string) ([]byte, string, error)) *tagClient {
	printed := func(out []byte, stderr string, err error) (string, error) { return string(out) + stderr, err }
	return &tagClient{
		putTagged: func(key, file, tagging string, token int) (string, error) {
			return printed(run(token, "put-tagged", d.bucket, key, file, tagging))
		},
		put: func(key string, tags map[string]string, token int) (string, error) {
			args := []string{"put-tagging", d.bucket, key}
			for _, k := range slices.Sorted(maps.Keys(tags)) {
				args = append(args, k+"="+tags[k])
			}
			return printed(run(token, args...))
		},
		get: func(key string) (map[string]string, string, error) {
			out, stderr, err := run(0, "get-tagging", d.bucket, key)
			if err != nil {
				return nil, stderr, err
			}
			var tags map[string]string
			if err := json.Unmarshal(out, &tags); err != nil {
				return nil, string(out), err
			}
			return tags, string(out), nil
		},
		delete: func(key string, token int) (string, error) {
			return printed(run(token, "delete-tagging", d.bucket, key))
		},
	}
}

// TestObjectTaggingCLIs: aws-cli and boto3 tag objects through the door,
// fenced, the token in X-Fence-Token, signed (aws-cli's plugin, boto3's
// before-sign.s3 handler): PutObject with tags stores them; PutObjectTagging
// replaces them and GetObjectTagging reads them back; a stale token is 409,
// which the client reads as StaleFenceToken, and leaves the tags as they
// were; DeleteObjectTagging removes them. After each step minio-go reads
// the tags straight from versitygw.
func TestObjectTaggingCLIs(t *testing.T) {
	d := newDoor(t)
	for _, name := range []string{"aws-cli", "boto3"} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, name, d)
			key := "tagged/" + name
			file, _ := writeFile(t, t.TempDir(), "obj", 4<<10, name)
			stored := func(step string, want map[string]string) {
				t.Helper()
				got, err := d.minio.GetObjectTagging(context.Background(), d.bucket, key, minio.GetObjectTaggingOptions{})
				if err != nil {
					t.Fatalf("%s: read the tags from versitygw: %v", step, err)
				}
				if m := got.ToMap(); !maps.Equal(m, want) && !(len(m) == 0 && len(want) == 0) {
					t.Errorf("%s: versitygw holds the tags %v; want %v", step, m, want)
				}
			}
			stale := func(step, out string, err error) {
				t.Helper()
				if err == nil || !strings.Contains(out, "StaleFenceToken") {
					t.Errorf("%s: exit %d, %v; want the client to report StaleFenceToken\n%s", step, exitCode(err), err, tail(out))
				}
			}

			if out, err := c.tags.putTagged(key, file, "project=fence&team=a%20b", 5); err != nil {
				t.Fatalf("PutObject with tags, token 5: exit %d, %v\n%s", exitCode(err), err, tail(out))
			}
			if _, token, ok := d.stored(t, key); !ok || token != "5" {
				t.Fatalf("versitygw records %s with token %q (present %v); want 5", key, token, ok)
			}
			stored("PutObject with tags", map[string]string{"project": "fence", "team": "a b"})

			if out, err := c.tags.put(key, map[string]string{"stage": "two"}, 5); err != nil {
				t.Fatalf("PutObjectTagging, token 5: exit %d, %v\n%s", exitCode(err), err, tail(out))
			}
			stored("PutObjectTagging", map[string]string{"stage": "two"})
			if got, out, err := c.tags.get(key); err != nil || !maps.Equal(got, map[string]string{"stage": "two"}) {
				t.Errorf("GetObjectTagging: %v, exit %d, %v; want stage=two\n%s", got, exitCode(err), err, tail(out))
			}

			if out, err := c.tags.putTagged(key, file, "project=stale", 7); err != nil {
				t.Fatalf("PutObject with tags, token 7: exit %d, %v\n%s", exitCode(err), err, tail(out))
			}
			out, err := c.tags.put(key, map[string]string{"stage": "stale"}, 6)
			stale("PutObjectTagging with token 6 under mark 7", out, err)
			out, err = c.tags.delete(key, 6)
			stale("DeleteObjectTagging with token 6 under mark 7", out, err)
			stored("after the stale writes", map[string]string{"project": "stale"})

			if out, err := c.tags.delete(key, 7); err != nil {
				t.Fatalf("DeleteObjectTagging, token 7: exit %d, %v\n%s", exitCode(err), err, tail(out))
			}
			stored("DeleteObjectTagging", nil)
			if got, out, err := c.tags.get(key); err != nil || len(got) != 0 {
				t.Errorf("GetObjectTagging after the delete: %v, exit %d, %v; want no tags\n%s", got, exitCode(err), err, tail(out))
			}
		})
	}
}
