package api

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTicketRequestValidate(t *testing.T) {
	valid := TicketRequest{
		Path:        ObjectPath{Bucket: "b", Key: "k"},
		Replaces:    ObjectVersion{Exists: true, ETag: `"abc"`},
		Token:       7,
		Size:        10,
		ContentType: "text/plain; charset=utf-8",
		Metadata:    map[string]string{"owner": "team a", "x_y.z-1": ""},
	}
	tests := []struct {
		name   string
		modify func(*TicketRequest)
		ok     bool
	}{
		{"valid", func(*TicketRequest) {}, true},
		{"create", func(r *TicketRequest) { r.Replaces = ObjectVersion{} }, true},
		{"one byte", func(r *TicketRequest) { r.Size = 1 }, true},
		{"empty object", func(r *TicketRequest) { r.Size = 0 }, false},
		{"largest object", func(r *TicketRequest) { r.Size = MaxTicketSize }, true},
		{"no content type, no metadata", func(r *TicketRequest) { r.ContentType, r.Metadata = "", nil }, true},
		{"one second", func(r *TicketRequest) { r.Expires = time.Second }, true},
		{"seven days", func(r *TicketRequest) { r.Expires = MaxTicketExpiry }, true},
		{"no token", func(r *TicketRequest) { r.Token = 0 }, false},
		{"replaces an object without ETag", func(r *TicketRequest) { r.Replaces = ObjectVersion{Exists: true} }, false},
		{"replaces an object with empty quotes", func(r *TicketRequest) { r.Replaces = ObjectVersion{Exists: true, ETag: `""`} }, false},
		{"negative size", func(r *TicketRequest) { r.Size = -1 }, false},
		{"over 5 GiB", func(r *TicketRequest) { r.Size = MaxTicketSize + 1 }, false},
		{"negative expiry", func(r *TicketRequest) { r.Expires = -time.Second }, false},
		{"under a second", func(r *TicketRequest) { r.Expires = 500 * time.Millisecond }, false},
		{"not whole seconds", func(r *TicketRequest) { r.Expires = 1500 * time.Millisecond }, false},
		{"over seven days", func(r *TicketRequest) { r.Expires = MaxTicketExpiry + time.Second }, false},
		{"metadata names the token", func(r *TicketRequest) { r.Metadata = map[string]string{MetadataFenceToken: "9"} }, false},
		{"metadata name upper case", func(r *TicketRequest) { r.Metadata = map[string]string{"Owner": "a"} }, false},
		{"metadata name empty", func(r *TicketRequest) { r.Metadata = map[string]string{"": "a"} }, false},
		{"metadata name with a colon", func(r *TicketRequest) { r.Metadata = map[string]string{"a:b": "a"} }, false},
		{"metadata value with CR LF", func(r *TicketRequest) { r.Metadata = map[string]string{"a": "x\r\nX-Amz-Acl: public-read"} }, false},
		{"metadata value not ASCII", func(r *TicketRequest) { r.Metadata = map[string]string{"a": "é"} }, false},
		{"metadata value with a run of spaces", func(r *TicketRequest) { r.Metadata = map[string]string{"a": "x  y"} }, false},
		{"metadata value with a trailing space", func(r *TicketRequest) { r.Metadata = map[string]string{"a": "x "} }, false},
		{"content type with a leading space", func(r *TicketRequest) { r.ContentType = " text/plain" }, false},
		{"content type with a tab", func(r *TicketRequest) { r.ContentType = "text/plain;\tq=1" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := valid
			r.Metadata = map[string]string{}
			for k, v := range valid.Metadata {
				r.Metadata[k] = v
			}
			tt.modify(&r)
			err := r.Validate()
			if tt.ok && err != nil || !tt.ok && !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("Validate(%+v) = %v; want ok %v (else ErrInvalidRequest)", r, err, tt.ok)
			}
		})
	}
}

func TestPartTicketRequestValidate(t *testing.T) {
	valid := PartTicketRequest{Path: ObjectPath{Bucket: "b", Key: "k"}, UploadID: "u", PartNumber: 1, Size: MinPartSize}
	tests := []struct {
		name   string
		modify func(*PartTicketRequest)
		ok     bool
	}{
		{"valid", func(*PartTicketRequest) {}, true},
		{"last part number", func(r *PartTicketRequest) { r.PartNumber = MaxParts }, true},
		{"a small last part", func(r *PartTicketRequest) { r.Size = 1 }, true},
		{"largest part", func(r *PartTicketRequest) { r.Size = MaxPartSize }, true},
		{"no upload id", func(r *PartTicketRequest) { r.UploadID = "" }, false},
		{"part 0", func(r *PartTicketRequest) { r.PartNumber = 0 }, false},
		{"part past the last", func(r *PartTicketRequest) { r.PartNumber = MaxParts + 1 }, false},
		{"empty part", func(r *PartTicketRequest) { r.Size = 0 }, false},
		{"part over 5 GiB", func(r *PartTicketRequest) { r.Size = MaxPartSize + 1 }, false},
		{"expiry under a second", func(r *PartTicketRequest) { r.Expires = time.Millisecond }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := valid
			tt.modify(&r)
			err := r.Validate()
			if tt.ok && err != nil || !tt.ok && !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("Validate(%+v) = %v; want ok %v (else ErrInvalidRequest)", r, err, tt.ok)
			}
		})
	}
}

// FuzzTicketRequestValidate: a ticket request that validates has
// metadata names S3 keeps as they are, and a content type and metadata
// values that are their own SigV4 canonical form (trimmed, runs of
// spaces made one), of printable ASCII: what the store verifies is what
// the gateway signed. Any other request is ErrInvalidRequest.
func FuzzTicketRequestValidate(f *testing.F) {
	f.Add("owner", "team a", "text/plain")
	f.Add("fence-token", "9", "")
	f.Add("Owner", " x", "text/plain ")
	f.Add("a:b", "x\r\ny", "a  b")
	f.Add("x.y_z-1", "", "application/json; charset=utf-8")
	f.Fuzz(func(t *testing.T, name, value, contentType string) {
		r := TicketRequest{Path: ObjectPath{Bucket: "b", Key: "k"}, Token: 1, Size: 1, ContentType: contentType, Metadata: map[string]string{name: value}}
		err := r.Validate()
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("Validate(%q: %q, %q) = %v; want nil or ErrInvalidRequest", name, value, contentType, err)
			}
			return
		}
		if name == "" || name == MetadataFenceToken || strings.ToLower(name) != name || strings.ContainsAny(name, ": \t\r\n") {
			t.Fatalf("Validate accepted metadata name %q", name)
		}
		for _, v := range []string{value, contentType} {
			if canonical := strings.Join(strings.Fields(v), " "); canonical != v {
				t.Fatalf("Validate accepted %q, whose canonical form is %q", v, canonical)
			}
			for i := 0; i < len(v); i++ {
				if v[i] < 0x20 || v[i] > 0x7e {
					t.Fatalf("Validate accepted %q, with byte %#x", v, v[i])
				}
			}
		}
	})
}
