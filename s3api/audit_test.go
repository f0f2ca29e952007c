package s3api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/gateway"
)

// syncBuffer is a log sink that tests read while the door writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// counter returns the value of the gateway's counter name with label
// value, summed over its series that have it.
func counter(tb testing.TB, gw *gateway.Gateway, name, value string) float64 {
	tb.Helper()
	families, err := gw.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestRefusedWritesAreAudited: a stale PutObject and a forbidden one
// through the door are counted and get the gateway's audit line, as on
// the REST API.
func TestRefusedWritesAreAudited(t *testing.T) {
	var logs syncBuffer
	d := newDoor(t, doorOptions{gateway: gateway.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	w := d.client(writerKey)
	if _, err := d.put(t, w, "audited", 10, "x"); err != nil {
		t.Fatal(err)
	}
	_, err := d.put(t, w, "audited", 9, "y")
	wantAPIError(t, err, http.StatusConflict, "StaleFenceToken")
	_, err = d.put(t, d.client(readerKey), "audited", 11, "z")
	wantAPIError(t, err, http.StatusForbidden, "AccessDenied")
	d.settle()
	if n := counter(t, d.gw, "fencegate_stale_refusals_total", "cache"); n != 1 {
		t.Errorf("stale refusals from the cache = %v; want 1", n)
	}
	if n := counter(t, d.gw, "fencegate_refused_writes_total", "stale-token"); n != 1 {
		t.Errorf("refused writes (stale-token) = %v; want 1", n)
	}
	if n := counter(t, d.gw, "fencegate_refused_writes_total", "forbidden"); n != 1 {
		t.Errorf("refused writes (forbidden) = %v; want 1", n)
	}
	out := logs.String()
	for _, want := range []string{
		`msg="write refused" resource=s3/` + d.bucket + `/audited token=9 high_water_mark=10`,
		`identity=writer api=s3`,
		`identity=reader api=s3`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}

// TestRefusalsOfGCSObjectsNamedByStore: a write the door refuses on a
// bucket that lives in GCS (a PutObject, a DeleteObject, a key of a
// DeleteObjects, a PutObject with a bad signature) is audited and
// published as gcs/<bucket>/<key>, as the REST API names it: the
// subscriber that may read the GCS bucket sees each refusal, the one
// that may read only S3 objects sees none of them (its first event is a
// refusal of an S3 object, which came after them), and the audit line
// names the GCS resource.
func TestRefusalsOfGCSObjectsNamedByStore(t *testing.T) {
	const gcsReaderKey = "AKIAGCSREADER"
	var logs syncBuffer
	read := []edge.Operation{edge.OpRead}
	g := newGCSDoorWith(t, "gcsaudit", gcsDoorOptions{
		logger: slog.New(slog.NewTextHandler(&logs, nil)),
		keys:   keys{gcsReaderKey: {secretOf + gcsReaderKey, "gcs-reader"}},
		auth: func(bucket string) edge.Auth {
			return edge.Auth{
				Identities: []edge.Identity{
					{Name: "writer", Grants: []edge.Grant{{Prefix: "", Operations: []edge.Operation{edge.OpRead, edge.OpWrite, edge.OpDelete}}}},
					{Name: "s3-reader", Grants: []edge.Grant{{Prefix: "s3/", Operations: read}}},
					{Name: "gcs-reader", Grants: []edge.Grant{{Prefix: "gcs/" + bucket + "/", Operations: read}}},
				},
				APIKeys: []edge.APIKey{
					{SHA256: sha256.Sum256([]byte("rest-s3-reader")), Identity: "s3-reader"},
					{SHA256: sha256.Sum256([]byte("rest-gcs-reader")), Identity: "gcs-reader"},
				},
			}
		},
	})
	s3Bucket := fmt.Sprintf("s3audit%d", bucketSeq.Add(1))
	sharedS3.CreateBucket(t, s3Bucket)
	gcsFeed := subscribeFeed(t, g.door, "", "rest-gcs-reader")
	s3Feed := subscribeFeed(t, g.door, "", "rest-s3-reader")

	ctx := context.Background()
	reader := g.client(gcsReaderKey, withHeader("X-Amz-Meta-Fence-Token", "5"))
	_, err := g.put(t, reader, "put", 5, "x")
	wantAPIError(t, err, http.StatusForbidden, "AccessDenied")
	_, err = reader.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(g.bucket), Key: aws.String("delete")})
	wantAPIError(t, err, http.StatusForbidden, "AccessDenied")
	out, err := reader.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(g.bucket), Delete: &types.Delete{
		Objects: []types.ObjectIdentifier{{Key: aws.String("batch")}},
	}})
	if err != nil || len(out.Errors) != 1 || aws.ToString(out.Errors[0].Code) != "AccessDenied" {
		t.Fatalf("DeleteObjects as gcs-reader: %v, %+v; want one AccessDenied", err, out)
	}
	forged := g.client(gcsReaderKey, func(o *s3.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider(gcsReaderKey, "not-the-secret", "")
	})
	_, err = g.put(t, forged, "forged", 7, "x")
	wantAPIError(t, err, http.StatusForbidden, "SignatureDoesNotMatch")
	_, err = reader.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String("in-s3"), Body: strings.NewReader("x")})
	wantAPIError(t, err, http.StatusForbidden, "AccessDenied")

	if e := s3Feed.next(t); e["kind"] != "write.refused" || e["resource"] != "s3/"+s3Bucket+"/in-s3" {
		t.Errorf("the S3 reader's first event is %v; want the refusal of s3/%s/in-s3 (none of the GCS bucket's)", e, s3Bucket)
	}
	gcsPrefix := "gcs/" + g.bucket + "/"
	for _, want := range []struct {
		resource string
		status   float64
	}{
		{gcsPrefix + "put", http.StatusForbidden},
		{gcsPrefix + "delete", http.StatusForbidden},
		{gcsPrefix + "batch", http.StatusForbidden},
		{gcsPrefix + "forged", http.StatusUnauthorized},
	} {
		e := gcsFeed.next(t)
		if e["kind"] != "write.refused" || e["resource"] != want.resource || e["status"] != want.status {
			t.Errorf("the GCS bucket's reader got %v; want write.refused of %s, status %v", e, want.resource, want.status)
		}
	}
	for _, key := range []string{"put", "delete", "batch", "forged"} {
		if want := `msg="write refused" resource=` + gcsPrefix + key + " "; !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestBadSignaturesLimitedOnTheFeed: PutObjects with a bad signature
// (refused as unauthenticated) name the bucket, key and token their
// sender picks, at no cost to it; the feed publishes them at the rate
// their log lines are limited to, a burst of 20 on a clock that does not
// move, and counts the rest in fencegate_events_suppressed_total. The
// decisions of known identities that follow (a 403, an accepted write)
// still arrive.
func TestBadSignaturesLimitedOnTheFeed(t *testing.T) {
	const (
		flood = 50
		burst = 20 // the default
	)
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	d := newDoor(t, doorOptions{gateway: gateway.Config{Now: func() time.Time { return at }}})
	f := subscribeFeed(t, d, "s3/"+d.bucket+"/", "rest-reader")
	forged := d.client(writerKey, func(o *s3.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider(writerKey, "not-the-secret", "")
	})
	for i := range flood {
		_, err := d.put(t, forged, fmt.Sprintf("flood-%d", i), api.Token(1000+i), "x")
		wantAPIError(t, err, http.StatusForbidden, "SignatureDoesNotMatch")
	}
	_, err := d.put(t, d.client(readerKey), "known", 5, "x")
	wantAPIError(t, err, http.StatusForbidden, "AccessDenied")
	if _, err := d.put(t, d.client(writerKey), "known", 5, "x"); err != nil {
		t.Fatal(err)
	}
	published := 0
	for {
		e := f.next(t)
		if e["status"] == float64(http.StatusUnauthorized) {
			published++
			continue
		}
		if e["kind"] != "write.refused" || e["identity"] != "reader" || e["status"] != float64(http.StatusForbidden) {
			t.Fatalf("after the flood: %v; want the reader's 403", e)
		}
		if e := f.next(t); e["kind"] != "write.accepted" || e["identity"] != "writer" {
			t.Fatalf("after the 403: %v; want the writer's accepted write", e)
		}
		break
	}
	if published != burst {
		t.Errorf("%d of %d bad signatures published; want the burst, %d", published, flood, burst)
	}
	families, err := d.gw.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	suppressed := -1.0
	for _, fam := range families {
		if fam.GetName() == "fencegate_events_suppressed_total" {
			suppressed = fam.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if suppressed != flood-burst {
		t.Errorf("fencegate_events_suppressed_total = %v; want %d", suppressed, flood-burst)
	}
}
