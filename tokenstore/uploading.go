package tokenstore

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
)

// uploadingPage is how many upload bindings each read of
// ResourcesUploading returns.
const uploadingPage = 1000

// ResourcesUploading returns the resources of every multipart upload
// bound when it reads (Uploads.BindUpload: <prefix>uploads/<id>, until
// the upload is completed, aborted or its TTL passes), read linearizably
// in pages of uploadingPage bindings in key order. A binding that exists
// from before the call until its end is in the answer. A binding whose
// value does not decode is an error: the caller cannot tell which
// resource it binds.
//
// Bindings are keyed by upload id, so the read is of every binding; the
// mark evictor (package retention) makes it once per page of marks, and
// only when a page holds a tombstone old enough to evict.
func (s *Store) ResourcesUploading(ctx context.Context) (map[api.Resource]bool, error) {
	prefix := s.prefix + "uploads/"
	end := clientv3.GetPrefixRangeEnd(prefix)
	out := make(map[api.Resource]bool)
	for from := prefix; ; {
		page, err := s.uploadingPage(ctx, from, end)
		if err != nil {
			return nil, err
		}
		for _, kv := range page.Kvs {
			var binding struct {
				Resource api.Resource `json:"resource"`
			}
			if err := json.Unmarshal(kv.Value, &binding); err != nil || binding.Resource == "" {
				return nil, fmt.Errorf("read upload bindings: %s: not a binding: %q", kv.Key, kv.Value)
			}
			out[binding.Resource] = true
		}
		if !page.More || len(page.Kvs) == 0 {
			return out, nil
		}
		from = string(page.Kvs[len(page.Kvs)-1].Key) + "\x00"
	}
}

// uploadingPage reads up to uploadingPage bindings from key from.
func (s *Store) uploadingPage(ctx context.Context, from, end string) (*clientv3.GetResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(uploadingPage))
	if err != nil {
		return nil, fmt.Errorf("read upload bindings: %w: %w", api.ErrUnavailable, err)
	}
	s.revisions.observe(resp.Header.Revision)
	return resp, nil
}
