package clients_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/url"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// TestMultipartChecksumClients: the AWS SDK for JavaScript's lib-storage
// Upload (over HTTP and HTTPS) and boto3's upload_file, each with
// ChecksumAlgorithm, upload 12 MiB in parts of 5 MiB; versitygw keeps the
// object's composite checksum of that algorithm ("<checksum of the parts'
// checksums>-3", COMPOSITE), read with minio-go straight from the store
// and through the door with checksum mode.
func TestMultipartChecksumClients(t *testing.T) {
	const partMiB = 5
	for _, tc := range []struct {
		client    string
		overTLS   bool
		algorithm string
	}{
		{"aws-sdk-js", false, "CRC32"},
		{"aws-sdk-js", true, "CRC32"},
		{"aws-sdk-js", true, "SHA256"},
		{"boto3", false, "CRC32"},
		{"boto3", false, "SHA256"},
	} {
		t.Run(fmt.Sprintf("%s/tls=%v/%s", tc.client, tc.overTLS, tc.algorithm), func(t *testing.T) {
			d := startDoor(t, tc.overTLS)
			c := newClient(t, tc.client, d)
			file, body := writeFile(t, t.TempDir(), "big", 12<<20, "checksums")
			key := "checksum/" + tc.algorithm
			if out, err := c.checksumUpload(key, file, 9, partMiB, tc.algorithm); err != nil {
				t.Fatalf("upload with ChecksumAlgorithm %s: exit %d, %v\n%s", tc.algorithm, exitCode(err), err, tail(out))
			}
			if stored, token, ok := d.stored(t, key); !ok || string(stored) != string(body) || token != "9" {
				t.Fatalf("versitygw holds %d bytes (the file's: %v) with token %q; want the file and 9", len(stored), string(stored) == string(body), token)
			}
			var sums []byte
			parts := 0
			for at := 0; at < len(body); at += partMiB << 20 {
				sums = append(sums, partChecksum(tc.algorithm, body[at:min(at+partMiB<<20, len(body))])...)
				parts++
			}
			want := fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(partChecksum(tc.algorithm, sums)), parts)
			ctx := context.Background()
			for _, from := range []struct {
				name string
				mc   *minio.Client
			}{{"versitygw", d.minio}, {"the door", doorMinio(t, d)}} {
				info, err := from.mc.StatObject(ctx, d.bucket, key, minio.StatObjectOptions{Checksum: true})
				if err != nil {
					t.Fatalf("StatObject from %s: %v", from.name, err)
				}
				got := map[string]string{"CRC32": info.ChecksumCRC32, "SHA256": info.ChecksumSHA256}[tc.algorithm]
				if got != want || info.ChecksumMode != "COMPOSITE" {
					t.Errorf("%s answers %s %q, type %q; want %q, COMPOSITE", from.name, tc.algorithm, got, info.ChecksumMode, want)
				}
			}
		})
	}
}

// partChecksum is the raw checksum of b by algorithm (CRC32 or SHA256).
func partChecksum(algorithm string, b []byte) []byte {
	if algorithm == "SHA256" {
		sum := sha256.Sum256(b)
		return sum[:]
	}
	return binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(b))
}

// doorMinio is a minio-go client of the door, with the clients' key.
func doorMinio(t *testing.T, d *door) *minio.Client {
	t.Helper()
	u, err := url.Parse(d.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := minio.New(u.Host, &minio.Options{
		Creds: credentials.NewStaticV4(accessKeyID, secretKey, ""), Secure: u.Scheme == "https",
		Transport: httpClient(t, d).Transport, Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}
