package jsonbody_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"fencegate/internal/jsonbody"
)

type part struct {
	Number int32  `json:"part_number"`
	ETag   string `json:"etag"`
}

type common struct {
	Note string `json:"note"`
}

// duration decodes itself, from a string.
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	v, err := time.ParseDuration(strings.Trim(string(b), `"`))
	*d = duration(v)
	return err
}

type request struct {
	common
	UploadID string            `json:"upload_id"`
	Parts    []part            `json:"parts"`
	First    *part             `json:"first"`
	Metadata map[string]string `json:"metadata"`
	Wait     duration          `json:"wait"`
	Any      any               `json:"any"`
	Skipped  string            `json:"-"`
	Untagged int               // Go's own name, spelled exactly
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name, body string
		wantErr    string // "" decodes
	}{
		{"every member", `{"note":"n","upload_id":"u","parts":[{"part_number":1,"etag":"e"}],"first":{"part_number":2,"etag":"f"},` +
			`"metadata":{"A":"1","a":"2"},"wait":"1s","any":{"x":1,"X":2},"Untagged":3}`, ""},
		{"empty object", `{}`, ""},
		{"null members", `{"parts":null,"first":null,"metadata":null}`, ""},
		{"upper case", `{"UPLOAD_ID":"u"}`, `unknown member "UPLOAD_ID"`},
		{"mixed case", `{"Upload_Id":"u"}`, `unknown member "Upload_Id"`},
		{"long s folds to s", `{"\u017fote":"n"}`, "unknown member"},
		{"embedded member in another case", `{"Note":"n"}`, `unknown member "Note"`},
		{"nested member in another case", `{"parts":[{"Part_Number":1}]}`, `unknown member "parts.0.Part_Number"`},
		{"pointer member in another case", `{"first":{"ETAG":"e"}}`, `unknown member "first.ETAG"`},
		{"Go's name in another case", `{"untagged":3}`, `unknown member "untagged"`},
		{"skipped field", `{"Skipped":"x"}`, "unknown member"},
		{"unknown member", `{"size":1}`, `unknown member "size"`},
		{"twice", `{"upload_id":"a","upload_id":"b"}`, `member "upload_id" twice`},
		{"twice, nested", `{"parts":[{"part_number":1},{"part_number":2,"part_number":3}]}`, `member "parts.1.part_number" twice`},
		{"map key twice", `{"metadata":{"a":"1","a":"2"}}`, `member "metadata.a" twice`},
		{"twice inside a value that decodes itself", `{"any":{"x":1,"x":2}}`, `member "any.x" twice`},
		{"after the value", `{} {}`, "data after the JSON value"},
		{"after the value, not JSON", `{}x`, "data after the JSON value"},
		{"not an object", `[1]`, "cannot unmarshal"},
		{"wrong kind", `{"parts":{"part_number":1}}`, "cannot unmarshal"},
		{"truncated", `{"parts":[`, "EOF"},
		{"empty", ``, "EOF"},
		{"32 deep", `{"any":` + strings.Repeat("[", 32) + strings.Repeat("]", 32) + `}`, ""},
		{"33 deep", `{"any":` + strings.Repeat("[", 33) + strings.Repeat("]", 33) + `}`, "nested deeper than 32"},
		{"2 MiB of [", strings.Repeat("[", 2<<20), "nested deeper than 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v request
			err := jsonbody.Decode([]byte(tt.body), &v)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Decode(%s) = %v; want it decoded", tt.body, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Decode(%s) = %v; want an error with %q", tt.body, err, tt.wantErr)
			}
		})
	}
}

// TestDecodeValues: what is decoded is what encoding/json decodes.
func TestDecodeValues(t *testing.T) {
	var v request
	body := `{"note":"n","upload_id":"u","parts":[{"part_number":1,"etag":"e"}],"first":{"part_number":2},"metadata":{"A":"1"},"wait":"1s","Untagged":3}`
	if err := jsonbody.Decode([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Note != "n" || v.UploadID != "u" || len(v.Parts) != 1 || v.Parts[0] != (part{1, "e"}) || v.First == nil || v.First.Number != 2 ||
		v.Metadata["A"] != "1" || v.Wait != duration(time.Second) || v.Untagged != 3 {
		t.Fatalf("decoded %+v", v)
	}
}

func TestDecodeNeedsAPointer(t *testing.T) {
	if err := jsonbody.Decode([]byte(`{}`), request{}); err == nil {
		t.Fatal("Decode into a struct value: no error; want one")
	}
}

// FuzzDecode: whatever Decode accepts, encoding/json decodes to the same
// value: the checks only ever refuse.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"upload_id":"u","parts":[{"part_number":1,"etag":"e"}]}`,
		`{"UPLOAD_ID":"u"}`, `{"upload_id":"a","upload_id":"b"}`, `{"metadata":{"a":"1","A":"2"}}`,
		`{"wait":"1s","any":[1,{"x":null}]}`, `{"first":{"part_number":2}} `, `{"\u017fote":"n"}`, `[`, `{}{}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var got request
		if err := jsonbody.Decode([]byte(body), &got); err != nil {
			return
		}
		var want request
		if err := json.Unmarshal([]byte(body), &want); err != nil {
			t.Fatalf("Decode accepted %q, which encoding/json refuses: %v", body, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) = %+v; encoding/json decodes %+v", body, got, want)
		}
	})
}
