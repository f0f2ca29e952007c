package s3api

import (
	"net/http"
)

// listBuckets is ListBuckets.
func (s *server) listBuckets(w http.ResponseWriter, r *http.Request, rq *request) {
	s.notImplemented(w, r, rq)
}

// listObjects is ListObjectsV2 and ListObjects.
func (s *server) listObjects(w http.ResponseWriter, r *http.Request, rq *request) {
	s.notImplemented(w, r, rq)
}

// headBucket is HeadBucket.
func (s *server) headBucket(w http.ResponseWriter, r *http.Request, rq *request) {
	s.notImplemented(w, r, rq)
}

// getBucketLocation is GetBucketLocation.
func (s *server) getBucketLocation(w http.ResponseWriter, r *http.Request, rq *request) {
	s.notImplemented(w, r, rq)
}
