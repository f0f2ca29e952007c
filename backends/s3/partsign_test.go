package s3_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/backends/s3"
)

// TestPresignUploadPartsAsTheSDK: PresignUploadParts answers, part for
// part, the tickets the SDK's presigner answers for the same parts at the
// same time, byte for byte, for keys and upload ids that escape every way
// S3 escapes them, over a path-style endpoint with a port; and it signs
// the parts after the first itself (the cheap path is the one taken).
func TestPresignUploadPartsAsTheSDK(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 7, 15, 4, 5, 0, time.UTC)
	c := s3.WithClock(newClient(t, server.Endpoint(), 0), func() time.Time { return at })
	for _, tt := range []struct{ key, upload string }{
		{"big", "upload-1"},
		{"a b+c/d~e%f", "id with spaces+plus"},
		{"ключ/日本/é", "x=y&z"},
		{"dir//./../k", strings.Repeat("u", 200)},
		{"'!*()$,;:@=&?#[]", "~-_."},
	} {
		t.Run(tt.key, func(t *testing.T) {
			var parts []api.PartTicketRequest
			for n := int32(1); n <= 12; n++ {
				size := int64(api.MinPartSize)
				if n == 12 {
					size = 17 // the last part, smaller
				}
				parts = append(parts, api.PartTicketRequest{Path: api.ObjectPath{Bucket: "parts-bucket", Key: tt.key}, UploadID: tt.upload, PartNumber: n, Size: size, Expires: 15 * time.Second})
			}
			got, err := c.PresignUploadParts(ctx, parts)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(parts) {
				t.Fatalf("%d tickets for %d parts", len(got), len(parts))
			}
			for i, r := range parts {
				want, err := c.PresignUploadPart(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got[i]) != fmt.Sprint(want) {
					t.Errorf("part %d:\n got %+v\nwant %+v (the SDK's)", r.PartNumber, got[i], want)
				}
			}
			if !s3.SignsPartsItself(c, ctx, parts[0], got[0]) {
				t.Errorf("the parts after the first were signed by the SDK; want the part signer")
			}
		})
	}
}

// TestPresignUploadPartsRefused: parts of two uploads, or a part that
// does not validate, are refused whole.
func TestPresignUploadPartsRefused(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, server.Endpoint(), 0)
	p := api.ObjectPath{Bucket: "parts-bucket", Key: "k"}
	part := func(upload string, n int32, size int64) api.PartTicketRequest {
		return api.PartTicketRequest{Path: p, UploadID: upload, PartNumber: n, Size: size}
	}
	for name, parts := range map[string][]api.PartTicketRequest{
		"two uploads":        {part("u1", 1, 5), part("u2", 2, 5)},
		"a part of size 0":   {part("u1", 1, 5), part("u1", 2, 0)},
		"part number 10001":  {part("u1", 1, 5), part("u1", api.MaxParts+1, 5)},
		"first part invalid": {part("u1", 0, 5), part("u1", 2, 5)},
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := c.PresignUploadParts(ctx, parts); err == nil || !strings.Contains(err.Error(), api.ErrInvalidRequest.Error()) {
				t.Fatalf("PresignUploadParts = %d tickets, %v; want ErrInvalidRequest", len(got), err)
			}
		})
	}
}

// TestPartTicketsFromTheBatchUpload: parts sent to versitygw on tickets
// the part signer signed are taken, and make an object.
func TestPartTicketsFromTheBatchUpload(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "batch-parts")
	c := newClient(t, server.Endpoint(), 0)
	p := api.ObjectPath{Bucket: "batch-parts", Key: "a b+c"}
	id, err := c.CreateUpload(ctx, api.CreateUploadInput{Path: p, Token: 3})
	if err != nil {
		t.Fatal(err)
	}
	bodies := []string{strings.Repeat("a", api.MinPartSize), strings.Repeat("b", api.MinPartSize), "the last part"}
	var reqs []api.PartTicketRequest
	for i, b := range bodies {
		reqs = append(reqs, api.PartTicketRequest{Path: p, UploadID: id, PartNumber: int32(i + 1), Size: int64(len(b))})
	}
	tickets, err := c.PresignUploadParts(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	var parts []api.Part
	for i, tk := range tickets {
		a := useTicket(t, tk, bodies[i], nil)
		if a.Status != http.StatusOK {
			t.Fatalf("part %d on its ticket = %d %s; want 200", i+1, a.Status, a.Code)
		}
		parts = append(parts, api.Part{Number: int32(i + 1), ETag: a.ETag})
	}
	if _, err := c.CompleteUpload(ctx, api.CompleteUploadInput{Path: p, UploadID: id, Parts: parts, Replaces: api.ObjectVersion{Exists: false}}); err != nil {
		t.Fatalf("completion of the parts sent on their tickets: %v", err)
	}
}

// BenchmarkPresignUploadParts signs the tickets of 1,000 parts, an op,
// through the SDK's presigner part by part and through
// PresignUploadParts, side by side:
//
//	go test ./backends/s3 -run '^$' -bench PresignUploadParts
func BenchmarkPresignUploadParts(b *testing.B) {
	ctx := context.Background()
	c := newClient(b, server.Endpoint(), 0)
	parts := make([]api.PartTicketRequest, 1000)
	for i := range parts {
		parts[i] = api.PartTicketRequest{Path: api.ObjectPath{Bucket: "parts-bucket", Key: "big"}, UploadID: "upload-1", PartNumber: int32(i + 1), Size: api.MinPartSize}
	}
	b.Run("sdk", func(b *testing.B) {
		for b.Loop() {
			for _, r := range parts {
				if _, err := c.PresignUploadPart(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("batch", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.PresignUploadParts(ctx, parts); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzPresignUploadPartsAsTheSDK: for any key, upload id and part sizes,
// PresignUploadParts answers the SDK's tickets, part for part, or the
// same refusal as the SDK's presigner.
func FuzzPresignUploadPartsAsTheSDK(f *testing.F) {
	f.Add("big", "upload-1", uint16(3), uint32(17))
	f.Add("a b+c/d~e%f", "id with spaces+plus", uint16(2), uint32(api.MinPartSize))
	f.Add("ключ/日本/é", "x=y&z", uint16(9999), uint32(1))
	f.Add("\xff\x00/..//k?#", "%zz", uint16(1), uint32(0))
	ctx := context.Background()
	at := time.Date(2026, 12, 7, 15, 4, 5, 0, time.UTC)
	c := s3.WithClock(newClient(f, server.Endpoint(), 0), func() time.Time { return at })
	f.Fuzz(func(t *testing.T, key, upload string, first uint16, last uint32) {
		var parts []api.PartTicketRequest
		for n := int32(first); n < int32(first)+3; n++ {
			size := int64(api.MinPartSize)
			if n == int32(first)+2 {
				size = int64(last)
			}
			parts = append(parts, api.PartTicketRequest{Path: api.ObjectPath{Bucket: "parts-bucket", Key: key}, UploadID: upload, PartNumber: n, Size: size})
		}
		got, err := c.PresignUploadParts(ctx, parts)
		var want []api.Ticket
		var wantErr error
		for _, r := range parts {
			tk, err := c.PresignUploadPart(ctx, r)
			if err != nil {
				wantErr = err
				break
			}
			want = append(want, tk)
		}
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("PresignUploadParts error %v; the SDK's, part by part, %v", err, wantErr)
		}
		if err == nil && fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("PresignUploadParts:\n got %+v\nwant %+v (the SDK's)", got, want)
		}
	})
}
