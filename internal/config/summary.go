package config

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// PrintSummary prints what the file configures, without values: some
// are secrets.
func (f *File) PrintSummary(w io.Writer) {
	var fields []string
	for _, s := range f.settings {
		fields = append(fields, s.path)
	}
	slices.Sort(fields)
	if len(fields) == 0 {
		fields = []string{"none"}
	}
	fmt.Fprintf(w, "  settings: %s\n", strings.Join(fields, ", "))
	if f.partners != nil {
		names := make([]string, len(f.partners))
		for i, p := range f.partners {
			names[i] = p.Name + " -> " + p.Upstream.Redacted()
		}
		fmt.Fprintf(w, "  partner routes: %d (%s)\n", len(f.partners), strings.Join(names, ", "))
	}
	if f.buckets != nil {
		names := make([]string, len(f.buckets))
		for i, b := range f.buckets {
			names[i] = b.Name + " -> " + b.Store
			if b.GCS.Endpoint != "" {
				names[i] += " at " + b.GCS.Endpoint
			}
		}
		fmt.Fprintf(w, "  buckets: %s (every other bucket -> s3)\n", strings.Join(names, ", "))
	}
	if f.auth != nil {
		s3Keys := 0
		for _, id := range f.auth.Identities {
			s3Keys += len(id.S3Keys)
		}
		fmt.Fprintf(w, "  auth: %d identities, %d API keys, %d client certificates, %d S3 access keys\n",
			len(f.auth.Identities), len(f.auth.APIKeys), len(f.auth.ClientCerts), s3Keys)
	} else {
		fmt.Fprintf(w, "  auth: off (no auth section: every client may do everything)\n")
	}
}
