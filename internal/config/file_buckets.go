package config

// The buckets section of the config file: which store holds each bucket.

import (
	"fmt"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"

	"fencegate/api"
	"fencegate/backends/gcs"
	"fencegate/tokenstore"
)

// Bucket is one entry of the buckets section: a bucket and the store
// that holds it. A bucket that no entry names is in S3.
type Bucket struct {
	// Name is the bucket's name.
	Name string
	// Store is api.StoreS3 (with the s3 section's settings) or
	// api.StoreGCS.
	Store string
	// GCS configures the client of a bucket in GCS; zero (Google's JSON
	// API, the standard Google credentials chain) for one in S3.
	GCS gcs.Config
}

// buckets decodes the buckets section, a list of {name, store, endpoint},
// refusing a bucket named twice.
func (d *decoder) buckets(n *yaml.Node, path string) {
	items, ok := d.list(n, path, "a list of buckets, such as {name: ledgers, store: gcs}")
	if !ok {
		return
	}
	firstAt := map[string]int{}
	buckets := make([]Bucket, 0, len(items))
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		b, nameNode := d.bucket(item, p)
		if nameNode == nil {
			continue
		}
		if line, dup := firstAt[b.Name]; dup {
			d.errorf(nameNode, p+".name", "bucket %q is mapped twice (first at line %d)", b.Name, line)
			continue
		}
		firstAt[b.Name] = nameNode.Line
		if b.Store != "" {
			buckets = append(buckets, b)
		}
	}
	d.out.buckets = buckets
}

// bucket decodes one entry. It returns the entry (an empty Store when the
// store is missing or not valid) and its name's node (nil when the name
// is missing or not valid).
func (d *decoder) bucket(n *yaml.Node, path string) (Bucket, *yaml.Node) {
	var (
		b        Bucket
		nameNode *yaml.Node
		endpoint *yaml.Node
		seen     = map[string]bool{}
	)
	d.fields(n, path, []field{
		{"name", func(d *decoder, n *yaml.Node, path string) {
			seen["name"] = true
			name, ok := d.scalar(n, path, "a bucket name")
			if !ok {
				return
			}
			if _, err := api.ParseObjectPath(name, "k"); err != nil {
				d.errorf(n, path, "%q: %v", name, strings.TrimPrefix(err.Error(), api.ErrInvalidObjectPath.Error()+": "))
				return
			}
			b.Name, nameNode = name, n
		}},
		{"store", func(d *decoder, n *yaml.Node, path string) {
			seen["store"] = true
			store, ok := d.scalar(n, path, "s3 or gcs")
			if !ok {
				return
			}
			if store != api.StoreS3 && store != api.StoreGCS {
				d.errorf(n, path, "%q: unknown store (want s3 or gcs)", store)
				return
			}
			b.Store = store
		}},
		{"endpoint", func(d *decoder, n *yaml.Node, path string) {
			s, ok := d.scalar(n, path, "a URL such as http://127.0.0.1:4443/storage/v1/")
			if !ok {
				return
			}
			if err := validateGCSEndpoint(s); err != nil {
				d.errorf(n, path, "%v", err)
				return
			}
			endpoint = n
			// An endpoint is an emulator's: it is sent no credentials.
			b.GCS = gcs.Config{Endpoint: s, WithoutAuthentication: true}
		}},
	})
	if n.Kind != yaml.MappingNode {
		return Bucket{}, nil
	}
	for _, key := range []string{"name", "store"} {
		if !seen[key] {
			d.errorf(n, joinPath(path, key), "missing (an entry needs name and store)")
		}
	}
	if endpoint != nil && b.Store == api.StoreS3 {
		d.errorf(endpoint, path+".endpoint", "only with store gcs (an s3 bucket takes the s3 section's settings)")
	}
	return b, nameNode
}

// validateGCSEndpoint checks a GCS endpoint: the JSON API's base URL, an
// http(s):// URL with a host and a path (such as /storage/v1/).
func validateGCSEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" ||
		strings.Trim(u.Path, "/") == "" {
		return fmt.Errorf("%q: want the JSON API's base URL, such as http://127.0.0.1:4443/storage/v1/", s)
	}
	return nil
}

// bucketsCrossValidate refuses a partner_answers bucket that the buckets
// section puts in GCS: answers are kept in S3.
func (d *decoder) bucketsCrossValidate() {
	answers := d.out.answers.Bucket
	if answers == "" {
		return
	}
	for i, b := range d.out.buckets {
		if b.Name == answers && b.Store != api.StoreS3 {
			d.errorf(d.nodes["partner_answers.bucket"], "partner_answers.bucket",
				"bucket %q is in %s (buckets[%d]); answers are kept in S3: name an S3 bucket", answers, b.Store, i)
		}
	}
}

// inStores returns policies with the prefix of each bucket's checks in
// the store that holds the bucket: a check for a bucket in GCS applies to
// gcs/BUCKET/..., the resources its writes carry, not to s3/BUCKET/...,
// which no write carries.
func inStores(policies []tokenstore.Policy, buckets []Bucket) []tokenstore.Policy {
	if len(policies) == 0 {
		return policies
	}
	out := make([]tokenstore.Policy, len(policies))
	for i, p := range policies {
		for _, b := range buckets {
			if b.Store != api.StoreS3 && p.Prefix == api.ObjectResource(b.Name, "") {
				p.Prefix = api.StoreObjectResource(b.Store, b.Name, "")
			}
		}
		out[i] = p
	}
	return out
}
