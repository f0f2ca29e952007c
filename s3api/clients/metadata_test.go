package clients_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"fencegate/internal/testenv"
)

// TestBoto3MetadataRoundTrip: boto3 writes objects with user metadata
// (PutObject, CopyObject with REPLACE, an upload in parts, PutObject over
// an object with other metadata) and reads back exactly the metadata it
// wrote, under the names it wrote (lower case, as S3 answers them): with
// the token sent as X-Fence-Token, no fence-token entry; sent as
// x-amz-meta-fence-token, that entry too. Every read answers the token in
// X-Fence-Token, and versitygw records it as x-amz-meta-fence-token on
// every object either way.
func TestBoto3MetadataRoundTrip(t *testing.T) {
	d := newDoor(t)
	c := newClient(t, "boto3", d)
	for _, tc := range []struct {
		spelling string
		token    int
	}{
		{"header", 5},
		{"metadata", 6},
	} {
		t.Run(tc.spelling, func(t *testing.T) {
			key := "meta/" + tc.spelling
			out, err := c.metadata(key, tc.spelling, tc.token)
			if err != nil {
				t.Fatalf("boto3 metadata round trip: exit %d, %v\n%s", exitCode(err), err, out)
			}
			type read struct {
				Head  map[string]string `json:"head"`
				Get   map[string]string `json:"get"`
				Token string            `json:"head-x-fence-token"`
			}
			var got map[string]read
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("boto3 printed %q: %v", out, err)
			}
			token := fmt.Sprint(tc.token)
			for step, wrote := range map[string]map[string]string{
				"put":      {"meta1": "v1"},
				"copy":     {"meta2": "v2"},
				"parts":    {"meta3": "v3"},
				"replaced": {"meta4": "v4"},
			} {
				if tc.spelling == "metadata" {
					wrote["fence-token"] = token
				}
				r := got[step]
				if !reflect.DeepEqual(r.Head, wrote) || !reflect.DeepEqual(r.Get, wrote) || r.Token != token {
					t.Errorf("%s: boto3 reads Metadata %v (HEAD), %v (GET), X-Fence-Token %q; want %v, %v, %q",
						step, r.Head, r.Get, r.Token, wrote, wrote, token)
				}
			}
			for _, k := range []string{key, key + ".copy", key + ".parts"} {
				if _, stored, ok := testenv.ReadStored(t, d.minio, d.bucket, k); !ok || stored != token {
					t.Errorf("versitygw records %s with fence-token %q (present %v); want %s", k, stored, ok, token)
				}
			}
		})
	}
}
