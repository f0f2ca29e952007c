package s3_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strings"
	"testing"

	"github.com/minio/crc64nvme"
	"github.com/minio/minio-go/v7"

	"fencegate/api"
)

// TestPartChecksumsReachTheStore: an upload created with a checksum
// algorithm (and type) gets each part with its checksum, sent over plain
// HTTP as an aws-chunked body with the checksum in a trailer, and a
// completion that names each part's checksum; versitygw, read with
// minio-go, lists each part's checksum (ListParts) and keeps the
// object's checksum of that algorithm and type: the
// checksum of the parts' checksums and their count (COMPOSITE), or the
// checksum of the whole object (FULL_OBJECT). The parts' sizes cross the
// trailer's 64 KiB chunks or end on one, and the last is empty.
func TestPartChecksumsReachTheStore(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "mpsum")
	c := newClient(t, server.Endpoint(), 0)
	mc := server.Minio(t)
	crc32c := crc32.MakeTable(crc32.Castagnoli)
	newHash := map[string]func() hash.Hash{
		"CRC32":     func() hash.Hash { return crc32.NewIEEE() },
		"CRC32C":    func() hash.Hash { return crc32.New(crc32c) },
		"CRC64NVME": func() hash.Hash { return crc64nvme.New() },
		"SHA1":      sha1.New,
		"SHA256":    sha256.New,
	}
	sum := func(alg string, b []byte) []byte {
		h := newHash[alg]()
		h.Write(b)
		return h.Sum(nil)
	}
	b64 := base64.StdEncoding.EncodeToString
	sizes := []int{api.MinPartSize + 1, api.MinPartSize, 0}
	var body []byte
	for i, n := range sizes {
		body = append(body, bytes.Repeat([]byte{byte('a' + i)}, n)...)
	}
	for _, tc := range []struct{ algorithm, checksumType string }{
		{"CRC32", "COMPOSITE"}, {"CRC32C", "COMPOSITE"}, {"SHA1", "COMPOSITE"}, {"SHA256", "COMPOSITE"},
		{"CRC32", "FULL_OBJECT"}, {"CRC64NVME", "FULL_OBJECT"},
	} {
		t.Run(tc.algorithm+"/"+tc.checksumType, func(t *testing.T) {
			p := api.ObjectPath{Bucket: "mpsum", Key: tc.algorithm + "-" + tc.checksumType}
			id, err := c.CreateUpload(ctx, api.CreateUploadInput{Path: p, Token: 4, ChecksumAlgorithm: tc.algorithm, ChecksumType: tc.checksumType})
			if err != nil {
				t.Fatalf("CreateUpload = %v", err)
			}
			var parts []api.Part
			var sums []byte
			at := 0
			for i, n := range sizes {
				part := body[at : at+n]
				at += n
				etag, err := c.UploadPart(ctx, api.UploadPartInput{Path: p, UploadID: id, Number: int32(i + 1), Body: bytes.NewReader(part), Size: int64(n), ChecksumAlgorithm: tc.algorithm})
				if err != nil {
					t.Fatalf("UploadPart(%d) = %v", i+1, err)
				}
				s := sum(tc.algorithm, part)
				sums = append(sums, s...)
				named := api.Part{Number: int32(i + 1), ETag: etag}
				*checksumField(&named.Checksums, tc.algorithm) = b64(s)
				parts = append(parts, named)
			}
			list, err := c.ListParts(ctx, p, id, 0, 0)
			if err != nil || len(list.Parts) != len(parts) {
				t.Fatalf("ListParts = %d parts, %v; want %d", len(list.Parts), err, len(parts))
			}
			for i, listed := range list.Parts {
				if listed.Checksums != parts[i].Checksums {
					t.Errorf("ListParts: part %d has checksums %+v; want %+v", listed.Number, listed.Checksums, parts[i].Checksums)
				}
			}
			if _, err := c.CompleteUpload(ctx, api.CompleteUploadInput{Path: p, UploadID: id, Parts: parts, ChecksumAlgorithm: tc.algorithm}); err != nil {
				t.Fatalf("CompleteUpload = %v", err)
			}
			want := b64(sum(tc.algorithm, body))
			if tc.checksumType == "COMPOSITE" {
				want = fmt.Sprintf("%s-%d", b64(sum(tc.algorithm, sums)), len(sizes))
			}
			info, err := mc.StatObject(ctx, p.Bucket, p.Key, minio.StatObjectOptions{Checksum: true})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{"CRC32": info.ChecksumCRC32, "CRC32C": info.ChecksumCRC32C, "CRC64NVME": info.ChecksumCRC64NVME, "SHA1": info.ChecksumSHA1, "SHA256": info.ChecksumSHA256}
			if got[tc.algorithm] != want || info.ChecksumMode != tc.checksumType {
				t.Errorf("versitygw keeps %s %q, type %q; want %q, %s", tc.algorithm, got[tc.algorithm], info.ChecksumMode, want, tc.checksumType)
			}
		})
	}
}

// TestPartChecksumsWithoutAnUploadAlgorithm: parts sent with checksums
// into an upload created without an algorithm (as the SDKs send every
// part by default), and a completion whose parts name those checksums
// (as UploadPart answered them), complete: the store keeps no part
// checksum for such an upload and refuses a completion that names one
// (InvalidPart, as S3), so the backend names none.
func TestPartChecksumsWithoutAnUploadAlgorithm(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "mpsumnone")
	c := newClient(t, server.Endpoint(), 0)
	mc := server.Minio(t)
	p := api.ObjectPath{Bucket: "mpsumnone", Key: "obj"}
	id, err := c.CreateUpload(ctx, api.CreateUploadInput{Path: p, Token: 4})
	if err != nil {
		t.Fatalf("CreateUpload = %v", err)
	}
	body := "a part with a checksum"
	etag, err := c.UploadPart(ctx, api.UploadPartInput{Path: p, UploadID: id, Number: 1, Body: strings.NewReader(body), Size: int64(len(body)), ChecksumAlgorithm: "crc32"})
	if err != nil {
		t.Fatalf("UploadPart = %v", err)
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.ChecksumIEEE([]byte(body)))
	part := api.Part{Number: 1, ETag: etag, Checksums: api.ObjectChecksums{CRC32: base64.StdEncoding.EncodeToString(sum[:])}}
	if _, err := c.CompleteUpload(ctx, api.CompleteUploadInput{Path: p, UploadID: id, Parts: []api.Part{part}}); err != nil {
		t.Fatalf("CompleteUpload = %v", err)
	}
	assertObject(t, mc, p, body, "4")
}

// checksumField is the field of algorithm in c.
func checksumField(c *api.ObjectChecksums, algorithm string) *string {
	return map[string]*string{"CRC32": &c.CRC32, "CRC32C": &c.CRC32C, "CRC64NVME": &c.CRC64NVME, "SHA1": &c.SHA1, "SHA256": &c.SHA256}[algorithm]
}

// TestPartChecksumOnlyAfterTheBodyEnds: a part whose body fails at its
// end (as the door's body does when the client's checksum does not match,
// withholding its last bytes), or ends short of its size, sends no
// trailer: the request is cut short and the store keeps no part.
func TestPartChecksumOnlyAfterTheBodyEnds(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "mpsumfail")
	c := newClient(t, server.Endpoint(), 0)
	p := api.ObjectPath{Bucket: "mpsumfail", Key: "obj"}
	id, err := c.CreateUpload(ctx, api.CreateUploadInput{Path: p, Token: 4, ChecksumAlgorithm: "CRC32"})
	if err != nil {
		t.Fatalf("CreateUpload = %v", err)
	}
	errBadDigest := errors.New("the body did not match its checksum")
	data := bytes.Repeat([]byte("x"), 3<<16+5)
	for name, tc := range map[string]struct {
		body io.Reader
		size int64
	}{
		"fails at its end": {io.MultiReader(bytes.NewReader(data), failingReader{errBadDigest}), int64(len(data))},
		"short":            {bytes.NewReader(data), int64(len(data) + 1)},
		"long":             {bytes.NewReader(data), int64(len(data) - 1)},
	} {
		t.Run(name, func(t *testing.T) {
			if etag, err := c.UploadPart(ctx, api.UploadPartInput{Path: p, UploadID: id, Number: 1, Body: tc.body, Size: tc.size, ChecksumAlgorithm: "crc32"}); err == nil {
				t.Fatalf("UploadPart = %q, nil; want an error", etag)
			}
			list, err := c.ListParts(ctx, p, id, 0, 0)
			if err != nil || len(list.Parts) != 0 {
				t.Fatalf("ListParts = %+v, %v; want no part", list.Parts, err)
			}
		})
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }
