package testenv

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// SpanAttrs returns s's attributes as strings, by key.
func SpanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// WantSpanAttrs fails unless s has every attribute of want; a want of ""
// is an attribute s must not have.
func WantSpanAttrs(tb testing.TB, s sdktrace.ReadOnlySpan, want map[string]string) {
	tb.Helper()
	got := SpanAttrs(s)
	for k, v := range want {
		if g, ok := got[k]; g != v || (v == "" && ok) {
			tb.Errorf("span %q: attribute %s = %q (present %v); want %q (all: %v)", s.Name(), k, g, ok, v, got)
		}
	}
}

// SpanChildren returns the spans of all whose parent is parent, and their
// names, in the order they ended, failing on any that is not a client
// span of parent's trace or that does not lie within parent.
func SpanChildren(tb testing.TB, parent sdktrace.ReadOnlySpan, all []sdktrace.ReadOnlySpan) (names []string, spans []sdktrace.ReadOnlySpan) {
	tb.Helper()
	for _, s := range all {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			continue
		}
		if s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			tb.Errorf("span %q is in trace %s; want its parent's %s", s.Name(), s.SpanContext().TraceID(), parent.SpanContext().TraceID())
		}
		if s.SpanKind() != trace.SpanKindClient {
			tb.Errorf("span %q is of kind %v; want client", s.Name(), s.SpanKind())
		}
		if s.StartTime().Before(parent.StartTime()) || s.EndTime().After(parent.EndTime()) {
			tb.Errorf("span %q [%v, %v] is not within its parent's [%v, %v]", s.Name(), s.StartTime(), s.EndTime(), parent.StartTime(), parent.EndTime())
		}
		names = append(names, s.Name())
		spans = append(spans, s)
	}
	return names, spans
}
