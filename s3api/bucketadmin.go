package s3api

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"fencegate/api"
	"fencegate/edge"
)

// Bucket administration: CreateBucket and DeleteBucket, for an identity
// with an admin grant on the whole bucket (on s3/BUCKET/, as
// objectResource names a bucket's prefix). They are passed to the
// store (Deps.Admin) as the gateway's own requests, built from what the
// door validated: nothing of the client's request but the bucket's name,
// and the one option the gateway honours, reaches the store.
//
// A bucket has no fencing token and no high-water mark: its creation and
// deletion are not fenced. Its objects' marks are per resource
// (s3/BUCKET/KEY) and are left alone by a deletion, so a bucket deleted
// and created again refuses the tokens its objects had refused before.
//
// What a CreateBucket may ask for that the gateway cannot honour is
// refused with its reason, never dropped (refuseCreateBucketHeaders,
// createBucketConfiguration): a bucket created other than asked would
// hold objects readable, lockable or placed otherwise than its creator
// believes.

// maxCreateBucketBodyBytes bounds a CreateBucket's body: a
// CreateBucketConfiguration with a LocationConstraint is under 200 bytes.
const maxCreateBucketBodyBytes = 64 << 10

// bucketAdmin authorizes the administration of bucket: admin on the
// whole bucket, then a bucket in S3 and a BucketAdmin to ask. The grant
// is checked first, so that an identity without one learns nothing of
// the bucket, and its refusal is audited.
func (s *server) bucketAdmin(ctx context.Context, bucket string) error {
	if err := s.edge.Authorize(ctx, edge.OpAdmin, s.objectResource(bucket, "")); err != nil {
		return err
	}
	if s.admin == nil {
		return fmt.Errorf("%w: this gateway does not administer buckets", errNotImplemented)
	}
	if store := s.engine.StoreOf(bucket); store != api.StoreS3 {
		return fmt.Errorf("%w: bucket %q is in %s, which the S3 API does not administer", errNotImplemented, bucket, store)
	}
	return nil
}

// createBucket is CreateBucket.
func (s *server) createBucket(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	in := api.CreateBucketInput{Bucket: rq.bucket}
	err := s.bucketAdmin(ctx, rq.bucket)
	if err == nil {
		in.OwnerEnforced, err = refuseCreateBucketHeaders(r.Header)
	}
	if err == nil {
		err = s.checkCreateBucketBody(r, rq)
	}
	if err == nil {
		err = s.administer(ctx, "create_bucket", rq.bucket, func(ctx context.Context) error { return s.admin.CreateBucket(ctx, in) })
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	w.Header().Set("Location", "/"+rq.bucket)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// deleteBucket is DeleteBucket.
func (s *server) deleteBucket(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	discardBody(r.Body)
	err := s.bucketAdmin(ctx, rq.bucket)
	if err == nil {
		err = s.administer(ctx, "delete_bucket", rq.bucket, func(ctx context.Context) error { return s.admin.DeleteBucket(ctx, rq.bucket) })
	}
	if err != nil {
		s.writeError(w, r, rq, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// administer runs one request of Deps.Admin about bucket, traced as the
// gateway traces its own S3 requests (edge.TraceS3, span "s3 "+span).
func (s *server) administer(ctx context.Context, span, bucket string, send func(context.Context) error) error {
	ctx, end := edge.TraceS3(ctx, span, bucket)
	err := send(ctx)
	var store *api.StoreError
	switch {
	case err == nil:
		end(http.StatusOK, nil)
	case errors.As(err, &store) && store.Status != 0:
		end(store.Status, nil)
	default:
		end(0, err)
	}
	return err
}

// refuseCreateBucketHeaders refuses what a CreateBucket's headers ask for
// that the gateway cannot honour, and reports whether they ask for object
// ownership BucketOwnerEnforced (which is passed on). Every object the
// gateway writes is written with its own credentials, so that the
// bucket's owner owns it, and the door grants no ACL: a canned ACL other
// than private, a grant, or an ownership that keeps ACLs
// (BucketOwnerPreferred, ObjectWriter) would give someone access the
// gateway does not decide. Object lock would make the store refuse the
// gateway's own deletes and overwrites for a retention the door never
// sees (its writes do not carry object lock either).
func refuseCreateBucketHeaders(h http.Header) (ownerEnforced bool, err error) {
	for name := range h {
		if strings.HasPrefix(name, "X-Amz-Grant-") {
			return false, fmt.Errorf("%w: the gateway does not honour %s on CreateBucket: it grants no ACL", errNotImplemented, name)
		}
	}
	for _, v := range h["X-Amz-Acl"] {
		if strings.TrimSpace(v) != "private" {
			return false, fmt.Errorf("%w: the gateway does not honour X-Amz-Acl %q on CreateBucket (only private: it grants no ACL)", errNotImplemented, api.Truncate(v, 64))
		}
	}
	lock, _, err := oneHeader(h, "X-Amz-Bucket-Object-Lock-Enabled") // sse.go
	switch {
	case err != nil:
		return false, err
	case strings.EqualFold(lock, "true"):
		return false, fmt.Errorf("%w: the gateway does not create buckets with object lock: the store would refuse its deletes and overwrites for a retention it never sees", errNotImplemented)
	case lock != "" && !strings.EqualFold(lock, "false"):
		return false, fmt.Errorf("%w: X-Amz-Bucket-Object-Lock-Enabled %q, want true or false", errInvalidArgument, api.Truncate(lock, 64))
	}
	ownership, _, err := oneHeader(h, "X-Amz-Object-Ownership")
	switch {
	case err != nil:
		return false, err
	case ownership == "BucketOwnerEnforced":
		return true, nil
	case ownership == "BucketOwnerPreferred" || ownership == "ObjectWriter":
		return false, fmt.Errorf("%w: the gateway does not honour X-Amz-Object-Ownership %s: it keeps ACLs, and the gateway grants none (BucketOwnerEnforced only)", errNotImplemented, ownership)
	case ownership != "":
		return false, fmt.Errorf("%w: X-Amz-Object-Ownership %q, want BucketOwnerEnforced, BucketOwnerPreferred or ObjectWriter", errInvalidArgument, api.Truncate(ownership, 64))
	}
	return false, nil
}

// createBucketConfiguration is CreateBucket's body. LocationConstraint is
// the only member the door honours; other members it knows (a directory
// bucket's Location and Bucket, Tags) are refused, unknown ones are
// MalformedXML.
type createBucketConfiguration struct {
	XMLName            xml.Name
	LocationConstraint []string `xml:"LocationConstraint"`
	Other              []struct {
		XMLName xml.Name
	} `xml:",any"`
}

// unhonouredConfiguration are the members of a CreateBucketConfiguration
// that the door knows and does not honour, with the reason.
var unhonouredConfiguration = map[string]string{
	"Location": "directory buckets (Location, Bucket) are not S3 buckets the gateway writes to",
	"Bucket":   "directory buckets (Location, Bucket) are not S3 buckets the gateway writes to",
	"Tags":     "the gateway does not tag buckets",
}

// checkCreateBucketBody reads a CreateBucket's body (bounded, verified by
// package sigv4 before it is parsed) and refuses a configuration the
// gateway cannot honour: a region other than the door's (buckets created
// through the door are where its store is), a directory bucket, tags.
func (s *server) checkCreateBucketBody(r *http.Request, rq *request) error {
	if rq.auth.DecodedContentLength > maxCreateBucketBodyBytes {
		return fmt.Errorf("%w: a CreateBucket body is at most %d bytes", errEntityTooLarge, maxCreateBucketBodyBytes)
	}
	body, err := contentMD5(r.Header, rq.auth.Body)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(body, maxCreateBucketBodyBytes+1))
	if err != nil {
		return err
	}
	if len(data) > maxCreateBucketBodyBytes {
		return fmt.Errorf("%w: a CreateBucket body is at most %d bytes", errEntityTooLarge, maxCreateBucketBodyBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	config, err := parseCreateBucketConfiguration(data)
	if err != nil {
		return err
	}
	if len(config.LocationConstraint) == 1 {
		if location := strings.TrimSpace(config.LocationConstraint[0]); location != "" && location != s.cfg.Region {
			return fmt.Errorf("%w: %q; this gateway creates buckets in its region, %s", errInvalidLocationConstraint, api.Truncate(location, 64), s.cfg.Region)
		}
	}
	return nil
}

// parseCreateBucketConfiguration parses data as one
// CreateBucketConfiguration document and nothing after it.
func parseCreateBucketConfiguration(data []byte) (createBucketConfiguration, error) {
	var config createBucketConfiguration
	dec := xml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&config); err != nil {
		return config, fmt.Errorf("%w: %v", errMalformedXML, err)
	}
	if config.XMLName.Local != "CreateBucketConfiguration" || (config.XMLName.Space != "" && config.XMLName.Space != s3Namespace) {
		return config, fmt.Errorf("%w: the body is %s, want CreateBucketConfiguration", errMalformedXML, api.Truncate(config.XMLName.Local, 64))
	}
	if len(config.LocationConstraint) > 1 {
		return config, fmt.Errorf("%w: %d LocationConstraint elements", errMalformedXML, len(config.LocationConstraint))
	}
	if len(config.Other) > 0 {
		name := config.Other[0].XMLName.Local
		if reason, ok := unhonouredConfiguration[name]; ok {
			return config, fmt.Errorf("%w: CreateBucketConfiguration %s: %s", errNotImplemented, name, reason)
		}
		return config, fmt.Errorf("%w: CreateBucketConfiguration has an unknown element %s", errMalformedXML, api.Truncate(name, 64))
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return config, nil
		}
		if err != nil {
			return config, fmt.Errorf("%w: %v", errMalformedXML, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return config, fmt.Errorf("%w: an element after CreateBucketConfiguration", errMalformedXML)
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return config, fmt.Errorf("%w: text after CreateBucketConfiguration", errMalformedXML)
			}
		}
	}
}
