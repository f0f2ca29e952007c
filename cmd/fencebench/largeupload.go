package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"fencegate/internal/devstack"
)

// The large upload: a body of --large-upload-bytes (6 GiB) PUT through the
// REST API of a fresh gateway, which uploads it to S3 in parts (above
// --multipart-threshold, 64 MiB by default) fenced at completion, streamed
// part by part: its RSS growth, measured as the 1 GiB upload's, is the
// summary's upload_6g_rss_mib (target: under 64 MiB).

// largeUploadBytes is --large-upload-bytes' default.
const largeUploadBytes = 6 << 30

// addLargeUploadFlag adds --large-upload-bytes to fs, setting *n.
func addLargeUploadFlag(fs *flag.FlagSet, n *byteSize) {
	*n = largeUploadBytes
	fs.Var(n, "large-upload-bytes", "size of the upload in parts (multipart, fenced at completion) through a fresh gateway whose RSS growth\nis measured; its objects go to disk, never tmpfs (0: none)")
}

// largeUpload runs the large upload through a fresh gateway of bin. When
// the stack's S3 server keeps its objects on tmpfs, the upload goes to a
// versitygw of its own on disk instead: the parts and the object they
// complete would otherwise hold twice the body in memory, for a moment.
func (b *bench) largeUpload(ctx context.Context, bin string, n int64) (uploadResult, error) {
	st := b.st
	if st.s3Data == "tmpfs" {
		disk, stop, err := startDiskS3(ctx, b.cfg, st)
		if err != nil {
			return uploadResult{}, err
		}
		defer stop()
		st = disk
	}
	return b.uploadOn(ctx, st, "large", bin, n)
}

// startDiskS3 starts a versitygw with its objects under the work
// directory, with the stack's bucket, and returns a copy of st that
// points to it.
func startDiskS3(ctx context.Context, cfg config, st *stack) (*stack, func(), error) {
	bin, err := devstack.FindVersityGW()
	if err != nil {
		return nil, nil, err
	}
	if cfg.s3KeepAlive {
		if bin, err = keepAliveWrapper(bin, cfg.workDir); err != nil {
			return nil, nil, err
		}
	}
	srv, err := devstack.StartVersityGW(ctx, devstack.S3Config{Binary: bin, Dir: filepath.Join(cfg.workDir, "s3-large")})
	if err != nil {
		return nil, nil, fmt.Errorf("versitygw for the large upload: %w", err)
	}
	if err := srv.CreateBucket(ctx, st.bucket); err != nil {
		srv.Close()
		return nil, nil, err
	}
	disk := *st
	disk.s3Endpoint, disk.accessKey, disk.secretKey, disk.s3Data = srv.Endpoint(), srv.AccessKey, srv.SecretKey, "disk"
	disk.closers = nil
	return &disk, srv.Close, nil
}
