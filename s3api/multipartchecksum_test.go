//lint:file-ignore SA1019 manager.Uploader is deprecated for transfermanager, but it is what most programs written against aws-sdk-go-v2 use today, so the door must serve it

package s3api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
)

// TestMultipartChecksumsReachTheStore: aws-sdk-go-v2's manager.Uploader
// with its defaults creates the upload with x-amz-checksum-algorithm
// CRC32, sends each part's CRC32 (in a trailer, over TLS) and names each
// part's checksum in the completion, as S3 takes them. The store keeps
// them: read straight from versitygw with minio-go, in checksum mode, the
// object answers the composite CRC32 of its parts ("<crc of the parts'
// crcs>-<parts>", type COMPOSITE), and HeadObject and GetObject through
// the door in checksum mode answer the same.
func TestMultipartChecksumsReachTheStore(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	const partSize = 5 << 20
	body := randomBytes(12<<20, 7)
	up := manager.NewUploader(d.client(writerKey), func(u *manager.Uploader) { u.PartSize = partSize })
	if _, err := up.Upload(ctx, &s3.PutObjectInput{
		Bucket: aws.String(d.bucket), Key: aws.String("big"), Body: bytes.NewReader(body),
		Metadata: map[string]string{"fence-token": "3"},
	}); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	var crcs []byte
	parts := 0
	for at := 0; at < len(body); at += partSize {
		crcs = binary.BigEndian.AppendUint32(crcs, crc32.ChecksumIEEE(body[at:min(at+partSize, len(body))]))
		parts++
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.ChecksumIEEE(crcs))
	want := fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(sum[:]), parts)

	info, err := d.minio.StatObject(ctx, d.bucket, "big", minio.StatObjectOptions{Checksum: true})
	if err != nil {
		t.Fatal(err)
	}
	if info.ChecksumCRC32 != want || info.ChecksumMode != "COMPOSITE" {
		t.Errorf("versitygw keeps checksum CRC32 %q (type %q, CRC64NVME %q); want %q, COMPOSITE", info.ChecksumCRC32, info.ChecksumMode, info.ChecksumCRC64NVME, want)
	}
	get, err := d.client(writerKey).HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("big"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	if v := aws.ToString(get.ChecksumCRC32); v != want || get.ChecksumType != types.ChecksumTypeComposite {
		t.Errorf("HeadObject through the door answers CRC32 %q, type %q; want %q, COMPOSITE", v, get.ChecksumType, want)
	}
	read, err := d.client(writerKey).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("big"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	defer read.Body.Close()
	got, err := io.ReadAll(read.Body)
	if err != nil || !bytes.Equal(got, body) {
		t.Errorf("GetObject through the door read %d bytes (the body's: %v), %v", len(got), bytes.Equal(got, body), err)
	}
	if v := aws.ToString(read.ChecksumCRC32); v != want || read.ChecksumType != types.ChecksumTypeComposite {
		t.Errorf("GetObject through the door answers CRC32 %q, type %q; want %q, COMPOSITE", v, read.ChecksumType, want)
	}
}
