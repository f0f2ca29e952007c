package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// collector is an OTLP/gRPC trace collector on loopback that keeps every
// span it is sent, with its resource's service.name.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	addr string

	mu    sync.Mutex
	spans []collectedSpan
}

// collectedSpan is a span as the collector got it.
type collectedSpan struct {
	service string
	span    *tracepb.Span
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{addr: ln.Addr().String()}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, c)
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return c
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		var service string
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, collectedSpan{service: service, span: s})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (c *collector) collected() []collectedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]collectedSpan(nil), c.spans...)
}

// TestServeExportsTraces: serve with --otlp-endpoint sends a fenced PUT's
// server span and its etcd and S3 children to the collector, at the
// latest when it stops (the batch processor's flush at exit).
func TestServeExportsTraces(t *testing.T) {
	st := startStack(t, "traced")
	col := startCollector(t)
	addr := freeAddr(t)
	base := "http://" + addr
	r := startRun(t, st.serveArgs(addr, "--otlp-endpoint", "http://"+col.addr)...)
	r.waitReady(t, base)

	req, err := http.NewRequest(http.MethodPut, base+"/v1/objects/traced/k", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Fence-Token", "7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d; want 201", resp.StatusCode)
	}
	start := time.Now()
	if err := r.stop(t); err != nil {
		t.Fatalf("serve returned %v; want a clean stop", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("serve took %v to stop", d)
	}

	spans := col.collected()
	var server *tracepb.Span
	for _, s := range spans {
		if s.span.GetKind() == tracepb.Span_SPAN_KIND_SERVER && s.span.GetName() == "PUT /v1/objects/{bucket}/*" {
			if s.service != "fencegate" {
				t.Errorf("server span's service.name = %q; want fencegate", s.service)
			}
			server = s.span
		}
	}
	if server == nil {
		t.Fatalf("the collector got no server span for the PUT; got %d spans: %v", len(spans), spanNames(spans))
	}
	children := map[string]bool{}
	for _, s := range spans {
		if string(s.span.GetParentSpanId()) == string(server.GetSpanId()) && string(s.span.GetTraceId()) == string(server.GetTraceId()) {
			children[s.span.GetName()] = true
			if s.service != "fencegate" {
				t.Errorf("span %q's service.name = %q; want fencegate", s.span.GetName(), s.service)
			}
		}
	}
	for _, want := range []string{"etcd fence_check", "s3 put"} {
		if !children[want] {
			t.Errorf("the server span has no child %q; children: %v", want, children)
		}
	}
}

func spanNames(spans []collectedSpan) []string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.span.GetName()
	}
	return names
}
