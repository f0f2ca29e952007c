package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"fencegate/api"
	"fencegate/backends/upstream"
)

// Answers keeps the bodies of the partner routes' stored answers under a
// prefix of a bucket of the gateway's own, one object per answer, so that
// etcd keeps only their digests (see the gateway's AnswerStore). Its
// objects are not fenced writes: the gateway names each one after the
// idempotency record it belongs to, writes it before the record says
// complete, and checks its digest when it reads it back. Make it with
// Client.Answers. It is safe for concurrent use.
//
// Objects are never read back after their record expired, and the gateway
// deletes them only when it knows that their record is gone; an S3
// lifecycle rule that expires the prefix's objects some time after the
// longest idempotency_ttl removes the rest (docs/operations.md).
type Answers struct {
	c      *Client
	bucket string
	prefix string
}

// MaxAnswerBytes is the largest body Answers keeps: partner routes store
// answers up to 1 MiB.
const MaxAnswerBytes = 1 << 20

// Answers returns the answer store on bucket, with every object's key
// starting with prefix (such as "fencegate/answers/"; empty: the whole
// bucket). The bucket must exist; it is not checked here.
func (c *Client) Answers(bucket, prefix string) (*Answers, error) {
	if err := ValidateAnswers(bucket, prefix); err != nil {
		return nil, fmt.Errorf("s3 answers: %w", err)
	}
	return &Answers{c: c, bucket: bucket, prefix: prefix}, nil
}

// ValidateAnswers checks the bucket and prefix of an answer store: they
// must make valid object paths of every answer's name, and a prefix
// other than "" must end with '/'.
func ValidateAnswers(bucket, prefix string) error {
	// A name is 64 hex digits, a '/' and 16 more (see the gateway's
	// answerName): the prefix must make valid object keys of them.
	if _, err := api.ParseObjectPath(bucket, prefix+strings.Repeat("0", 81)); err != nil {
		return fmt.Errorf("bucket %q, prefix %q: %w", bucket, prefix, err)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("prefix %q: want it to end with '/'", prefix)
	}
	return nil
}

func (a *Answers) key(name string) string { return a.prefix + name }

// PutAnswer writes body as the object prefix+name, replacing any.
func (a *Answers) PutAnswer(ctx context.Context, name string, body []byte) error {
	ctx, release := boundConnWait(ctx, a.c.connWait)
	defer release()
	_, err := a.c.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(a.bucket),
		Key:           aws.String(a.key(name)),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String("application/octet-stream"),
	})
	if err != nil {
		return fmt.Errorf("s3 answers: put %s: %w", a.key(name), upstream.Transport(err))
	}
	return nil
}

// GetAnswer reads the object prefix+name: api.ErrNotFound when there is
// none, api.ErrUpstream (or api.ErrUpstreamTimeout) when S3 fails, and
// an error when it holds more than MaxAnswerBytes.
func (a *Answers) GetAnswer(ctx context.Context, name string) ([]byte, error) {
	ctx, release := boundConnWait(ctx, a.c.connWait)
	defer release()
	out, err := a.c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.bucket), Key: aws.String(a.key(name))})
	if err != nil {
		return nil, fmt.Errorf("s3 answers: get %s: %w", a.key(name), mapReadError(err))
	}
	defer out.Body.Close()
	body, err := io.ReadAll(io.LimitReader(out.Body, MaxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("s3 answers: get %s: %w", a.key(name), upstream.Transport(err))
	}
	if len(body) > MaxAnswerBytes {
		return nil, fmt.Errorf("s3 answers: get %s: %w: over %d bytes", a.key(name), api.ErrUpstream, MaxAnswerBytes)
	}
	return body, nil
}

// DeleteAnswer deletes the object prefix+name; one that is not there is
// no error.
func (a *Answers) DeleteAnswer(ctx context.Context, name string) error {
	ctx, release := boundConnWait(ctx, a.c.connWait)
	defer release()
	_, err := a.c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(a.bucket), Key: aws.String(a.key(name))})
	if err != nil && !errors.Is(mapReadError(err), api.ErrNotFound) {
		return fmt.Errorf("s3 answers: delete %s: %w", a.key(name), upstream.Transport(err))
	}
	return nil
}
