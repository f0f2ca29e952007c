package sigv4_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"fencegate/s3api/sigv4"
)

const (
	testAccessKey = "AKIDFENCEGATETEST"
	testSecret    = "s3cr3t/FENCEGATE+test/KEY"
	testRegion    = "us-east-1"
)

// keys is a fixed KeyStore.
type keys map[string]string

func (k keys) SecretKey(_ context.Context, id string) (string, string, error) {
	s, ok := k[id]
	if !ok {
		return "", "", sigv4.ErrUnknownAccessKey
	}
	return s, "identity-" + id, nil
}

// outcome is what the test server saw of one request.
type outcome struct {
	Method, Path  string
	Code          string // S3 error code, "" when verified
	Err           error
	Body          []byte // bytes the verified reader handed over
	Complete      bool   // the reader returned io.EOF: the body is good
	ContentSHA256 string // x-amz-content-sha256 as sent
	Checksum      string // Result.ChecksumAlgorithm
	// ChecksumBefore and ChecksumAfter are Result.Checksum() before the
	// body was read and once it ended (io.EOF or an error).
	ChecksumBefore, ChecksumAfter string
	Identity                      string
}

// s3Server is an httptest server that runs a Verifier on every request,
// stores verified PUT bodies and serves them to verified GETs, and answers
// refusals with S3's XML error body.
type s3Server struct {
	*httptest.Server
	mu       sync.Mutex
	outcomes []outcome
	objects  map[string][]byte
}

func newS3Server(tb testing.TB, tls bool, cfg sigv4.Config) *s3Server {
	tb.Helper()
	if cfg.Keys == nil {
		cfg.Keys = keys{testAccessKey: testSecret}
	}
	v, err := sigv4.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	s := &s3Server{objects: map[string][]byte{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := outcome{Method: r.Method, Path: r.URL.Path, ContentSHA256: r.Header.Get("X-Amz-Content-Sha256")}
		defer func() {
			s.mu.Lock()
			s.outcomes = append(s.outcomes, o)
			s.mu.Unlock()
		}()
		fail := func(err error) {
			o.Err = err
			var e *sigv4.Error
			if !errors.As(err, &e) {
				e = sigv4.ErrInternal
			}
			o.Code = e.Code
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(e.Status)
			fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>test</RequestId></Error>", e.Code, e.Message, r.URL.Path)
		}
		res, err := v.Verify(r.Context(), r)
		if err != nil {
			fail(err)
			return
		}
		o.Checksum, o.Identity = res.ChecksumAlgorithm, res.Identity
		o.ChecksumBefore = res.Checksum()
		defer func() { o.ChecksumAfter = res.Checksum() }()
		buf := make([]byte, 7000) // odd size: reads straddle chunk boundaries
		for {
			n, err := res.Body.Read(buf)
			o.Body = append(o.Body, buf[:n]...)
			if err == io.EOF {
				o.Complete = true
				break
			}
			if err != nil {
				fail(err)
				return
			}
		}
		switch r.Method {
		case http.MethodPut:
			s.mu.Lock()
			s.objects[r.URL.Path] = o.Body
			s.mu.Unlock()
			sum := md5.Sum(o.Body)
			w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		case http.MethodGet, http.MethodHead:
			s.mu.Lock()
			b, ok := s.objects[r.URL.Path]
			s.mu.Unlock()
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
			w.Write(b)
		}
	})
	if tls {
		s.Server = httptest.NewTLSServer(h)
	} else {
		s.Server = httptest.NewServer(h)
	}
	tb.Cleanup(s.Close)
	return s
}

// last returns the outcome of the last request.
func (s *s3Server) last(tb testing.TB) outcome {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.outcomes) == 0 {
		tb.Fatal("the server saw no request")
	}
	return s.outcomes[len(s.outcomes)-1]
}
