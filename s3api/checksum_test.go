package s3api_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"
	"github.com/minio/crc64nvme"
)

// recordingLogger keeps every line an SDK client logs.
type recordingLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordingLogger) Logf(class logging.Classification, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(class)+" "+fmt.Sprintf(format, v...))
}

func (l *recordingLogger) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestReadChecksums: aws-sdk-go-v2 reads with checksum mode enabled (its
// default) and gets the store's checksums, as from S3: it validates the
// body against one and logs no "no supported checksum" line. versitygw
// keeps a CRC64NVME of every object; the answer's is the body's. A
// byte range is answered without checksums, as S3 does.
func TestReadChecksums(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	body := "bytes whose checksum the store keeps"
	if _, err := d.put(t, d.client(writerKey), "k", 5, body); err != nil {
		t.Fatal(err)
	}
	var sum [8]byte
	binary.BigEndian.PutUint64(sum[:], crc64nvme.Checksum([]byte(body)))
	wantCRC := base64.StdEncoding.EncodeToString(sum[:])

	log := &recordingLogger{}
	c := d.client(writerKey, func(o *s3.Options) { o.Logger = log })
	get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(get.Body)
	get.Body.Close()
	if err != nil || string(got) != body {
		t.Fatalf("GetObject body = %q, %v; want %q", got, err, body)
	}
	if v := aws.ToString(get.ChecksumCRC64NVME); v != wantCRC {
		t.Errorf("GetObject x-amz-checksum-crc64nvme = %q; want %q, the body's", v, wantCRC)
	}
	if used, ok := s3.GetChecksumValidationMetadata(get.ResultMetadata); !ok || len(used.AlgorithmsUsed) == 0 {
		t.Errorf("the SDK validated the body with %v (%v); want a checksum", used.AlgorithmsUsed, ok)
	}
	if strings.Contains(log.text(), "no supported checksum") {
		t.Errorf("the SDK logged:\n%s\nwant no \"no supported checksum\" line", log.text())
	}

	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	if v := aws.ToString(head.ChecksumCRC64NVME); v != wantCRC || head.ChecksumType != types.ChecksumTypeFullObject {
		t.Errorf("HeadObject checksum = %q, type %q; want %q, FULL_OBJECT", v, head.ChecksumType, wantCRC)
	}

	ranged, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("k"), Range: aws.String("bytes=0-4"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(ranged.Body)
	ranged.Body.Close()
	if err != nil || string(got) != body[:5] {
		t.Fatalf("ranged GetObject body = %q, %v; want %q", got, err, body[:5])
	}
	if ranged.ChecksumCRC64NVME != nil || ranged.ChecksumCRC32 != nil {
		t.Errorf("ranged GetObject answered checksums %v %v; want none", aws.ToString(ranged.ChecksumCRC64NVME), aws.ToString(ranged.ChecksumCRC32))
	}
}
