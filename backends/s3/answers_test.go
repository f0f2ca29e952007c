package s3_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"fencegate/api"
)

// TestAnswersOnRealS3: an answer is written, read back byte for byte,
// deleted (twice: the second is no error), and then not found.
func TestAnswersOnRealS3(t *testing.T) {
	server.CreateBucket(t, "answers")
	answers, err := newClient(t, server.Endpoint(), 5*time.Second).Answers("answers", "fencegate/answers/")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	body := bytes.Repeat([]byte{0, 1, 2, 0xff}, 1<<16)
	if err := answers.PutAnswer(ctx, "ab/cd", body); err != nil {
		t.Fatalf("PutAnswer = %v", err)
	}
	if got, err := answers.GetAnswer(ctx, "ab/cd"); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("GetAnswer = %d bytes, %v; want the %d written", len(got), err, len(body))
	}
	for range 2 {
		if err := answers.DeleteAnswer(ctx, "ab/cd"); err != nil {
			t.Fatalf("DeleteAnswer = %v", err)
		}
	}
	if _, err := answers.GetAnswer(ctx, "ab/cd"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("GetAnswer after delete = %v; want api.ErrNotFound", err)
	}
}

func TestAnswersConfig(t *testing.T) {
	c := newClient(t, server.Endpoint(), time.Second)
	for _, tc := range []struct {
		bucket, prefix string
		ok             bool
	}{
		{"answers", "fencegate/answers/", true},
		{"answers", "", true},
		{"", "x/", false},
		{"Answers", "x/", false},
		{"answers", "x", false},
		{"answers", "/x/", false},
		{"answers", "x//", false},
		{"answers", "../x/", false},
	} {
		if _, err := c.Answers(tc.bucket, tc.prefix); (err == nil) != tc.ok {
			t.Errorf("Answers(%q, %q) = %v; want ok %v", tc.bucket, tc.prefix, err, tc.ok)
		}
	}
}
