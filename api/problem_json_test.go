package api

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// hostile holds strings that every escaping rule of encoding/json applies
// to.
var hostile = []string{
	"",
	"plain ascii",
	`quote " backslash \ slash /`,
	"controls \x00\x01\x1f \b\f\n\r\t \x7f",
	"html <script>&amp;</script>",
	"utf-8 é ü 日本 🙂",
	"separators \u2028 and \u2029",
	"invalid \xff\xfe utf-8 \xc3 cut",
	"surrogate half \xed\xa0\x80",
	"\xe2\x80", // a U+2028 cut short
}

// TestProblemAppendJSONMatchesEncodingJSON checks that AppendJSON writes
// the bytes json.Marshal writes: for problems the gateway sends, for every
// escaping rule, and for thousands of random ones.
func TestProblemAppendJSONMatchesEncodingJSON(t *testing.T) {
	cases := []Problem{
		{},
		ProblemFor(&StaleTokenError{Resource: "s3/b/k", Token: 4, HighWaterMark: 5}),
		ProblemFor(ErrUnavailable),
		{Type: "t", Title: "x", Status: 409, Token: 1<<64 - 1, HighWaterMark: 1, Retryable: true},
	}
	for _, s := range hostile {
		cases = append(cases, Problem{Type: s, Title: s, Status: -1, Detail: s, Instance: s, Resource: Resource(s), RequestID: s})
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 5000 {
		cases = append(cases, randomProblem(rng))
	}
	for _, p := range cases {
		checkProblemJSON(t, p)
	}
}

// TestProblemAppendJSONHasEveryField fails when Problem gains a field
// that AppendJSON does not write: it sets every field to a value that is
// not its zero.
func TestProblemAppendJSONHasEveryField(t *testing.T) {
	var p Problem
	v := reflect.ValueOf(&p).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(400 + i))
		case reflect.Uint64:
			f.SetUint(uint64(100 + i))
		case reflect.Bool:
			f.SetBool(true)
		default:
			t.Fatalf("field %s is a %s: teach AppendJSON and this test about it", v.Type().Field(i).Name, f.Kind())
		}
	}
	checkProblemJSON(t, p)
}

func FuzzProblemAppendJSON(f *testing.F) {
	for _, s := range hostile {
		f.Add(s, s, uint64(len(s)), true)
	}
	f.Fuzz(func(t *testing.T, detail, resource string, token uint64, retryable bool) {
		checkProblemJSON(t, Problem{Type: resource, Title: detail, Status: int(token % 600), Detail: detail,
			Instance: resource, Resource: Resource(resource), Token: Token(token), HighWaterMark: Token(token / 2),
			Retryable: retryable, RequestID: detail})
	})
}

func checkProblemJSON(t *testing.T, p Problem) {
	t.Helper()
	want, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.AppendJSON([]byte("prefix")); string(got) != "prefix"+string(want) {
		t.Fatalf("AppendJSON(%#v)\n got %s\nwant prefix%s", p, got, want)
	}
}

// randomProblem fills some of a problem's fields with random strings made
// of the characters the escaping rules care about.
func randomProblem(rng *rand.Rand) Problem {
	pieces := []string{"a", "Z", "0", " ", `"`, `\`, "/", "<", ">", "&", "\x00", "\x1f", "\n", "\t", "\x7f",
		"é", "日", "🙂", "\u2028", "\u2029", "\xff", "\xc3", "\xe2\x80", "\xed\xa0\x80"}
	str := func() string {
		if rng.IntN(3) == 0 {
			return ""
		}
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	return Problem{
		Type: str(), Title: str(), Status: rng.IntN(600), Detail: str(), Instance: str(),
		Resource: Resource(str()), Token: Token(rng.Uint64() >> rng.IntN(64)),
		HighWaterMark: Token(rng.Uint64() >> rng.IntN(64)), Retryable: rng.IntN(2) == 0, RequestID: str(),
	}
}
