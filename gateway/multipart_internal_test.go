package gateway

import (
	"context"
	"errors"
	"time"

	"fencegate/api"
)

// noMultipart is a MultipartStore and UploadStore that refuses
// everything: WithMultipart's argument where a test needs the option but
// no uploads (the OpenAPI tests: the option mounts no routes).
type noMultipart struct{}

var (
	_ MultipartStore = noMultipart{}
	_ UploadStore    = noMultipart{}
)

var errNoUploads = errors.New("no multipart uploads in this test")

func (noMultipart) CreateUpload(context.Context, api.CreateUploadInput) (string, error) {
	return "", errNoUploads
}
func (noMultipart) UploadPart(context.Context, api.UploadPartInput) (string, error) {
	return "", errNoUploads
}
func (noMultipart) CopyPart(context.Context, api.CopyPartInput) (string, error) {
	return "", errNoUploads
}
func (noMultipart) CompleteUpload(context.Context, api.CompleteUploadInput) (string, error) {
	return "", errNoUploads
}
func (noMultipart) AbortUpload(context.Context, api.ObjectPath, string) error { return errNoUploads }
func (noMultipart) ListParts(context.Context, api.ObjectPath, string, int32, int32) (api.PartList, error) {
	return api.PartList{}, errNoUploads
}
func (noMultipart) ListUploads(context.Context, api.ListUploadsInput) (api.UploadList, error) {
	return api.UploadList{}, errNoUploads
}
func (noMultipart) BindUpload(context.Context, api.UploadBinding, time.Duration) error {
	return errNoUploads
}
func (noMultipart) Upload(context.Context, api.Resource, string) (api.UploadBinding, error) {
	return api.UploadBinding{}, errNoUploads
}
func (noMultipart) UnbindUpload(context.Context, api.UploadBinding) error { return errNoUploads }
func (noMultipart) FinishUpload(context.Context, api.UploadBinding, time.Duration) error {
	return errNoUploads
}
