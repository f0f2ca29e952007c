package api

import (
	"errors"
	"testing"
)

// TestUploadCompletionValidate: a completion names an upload and 1 to
// MaxParts parts, each with a number in range and an ETag, by strictly
// ascending number; anything else is ErrInvalidRequest.
func TestUploadCompletionValidate(t *testing.T) {
	part := func(n int32) CompletedPart { return CompletedPart{Number: n, ETag: `"e"`} }
	most := make([]CompletedPart, MaxParts)
	for i := range most {
		most[i] = part(int32(i + 1))
	}
	tests := []struct {
		name string
		c    UploadCompletion
		ok   bool
	}{
		{"one part", UploadCompletion{UploadID: "u", Parts: []CompletedPart{part(1)}}, true},
		{"parts with gaps", UploadCompletion{UploadID: "u", Parts: []CompletedPart{part(2), part(7), part(MaxParts)}}, true},
		{"every part", UploadCompletion{UploadID: "u", Parts: most}, true},
		{"no upload id", UploadCompletion{Parts: []CompletedPart{part(1)}}, false},
		{"no parts", UploadCompletion{UploadID: "u"}, false},
		{"too many parts", UploadCompletion{UploadID: "u", Parts: append(most[:MaxParts:MaxParts], part(MaxParts+1))}, false},
		{"part 0", UploadCompletion{UploadID: "u", Parts: []CompletedPart{part(0)}}, false},
		{"negative part", UploadCompletion{UploadID: "u", Parts: []CompletedPart{part(-1)}}, false},
		{"part past the most", UploadCompletion{UploadID: "u", Parts: []CompletedPart{part(MaxParts + 1)}}, false},
		{"no etag", UploadCompletion{UploadID: "u", Parts: []CompletedPart{{Number: 1}}}, false},
		{"descending", UploadCompletion{UploadID: "u", Parts: []CompletedPart{part(2), part(1)}}, false},
		{"a part twice", UploadCompletion{UploadID: "u", Parts: []CompletedPart{part(1), part(1)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if tt.ok && err != nil || !tt.ok && !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("Validate(%s) = %v; want ok %v (else ErrInvalidRequest)", tt.name, err, tt.ok)
			}
		})
	}
}
