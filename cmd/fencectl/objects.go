package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"fencegate/api"
	"fencegate/api/client"
)

// put is `fencectl put [--ticket] BUCKET/KEY FILE [--token N]`. With
// --ticket, the bytes go straight to the store on a ticket
// (client.PutObjectOnTicket).
func (c *cli) put(ctx context.Context, args []string) int {
	fs := newFlagSet("put")
	tokenText := c.tokenFlag(fs)
	onTicket := fs.Bool("ticket", false, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return usageError(c.stderr, fmt.Errorf("put: %w", err))
	}
	if len(pos) != 2 {
		return usageError(c.stderr, fmt.Errorf("put: want BUCKET/KEY FILE"))
	}
	bucket, key, err := splitObject(pos[0])
	if err != nil {
		return usageError(c.stderr, fmt.Errorf("put: %w", err))
	}
	token, err := parseToken(*tokenText)
	if err != nil {
		return usageError(c.stderr, fmt.Errorf("put: %w", err))
	}
	var body []byte
	if pos[1] == "-" {
		body, err = io.ReadAll(c.stdin)
	} else {
		body, err = os.ReadFile(pos[1])
	}
	if err != nil {
		return c.fail(fmt.Errorf("put: %w", err))
	}
	var res *client.PutResult
	how := ""
	if *onTicket {
		res, err = c.client.PutObjectOnTicket(ctx, bucket, key, token, bytes.NewReader(body))
		how = " on a ticket"
	} else {
		res, err = c.client.PutObject(ctx, bucket, key, token, bytes.NewReader(body))
	}
	if err != nil {
		return c.fail(err)
	}
	verb := "replaced"
	if res.Created {
		verb = "created"
	}
	return c.print(res, fmt.Sprintf("%s %s/%s with token %d%s (%d bytes, etag %s)", verb, bucket, key, res.Token, how, len(body), res.ETag))
}

// get is `fencectl get BUCKET/KEY [-o FILE]`.
func (c *cli) get(ctx context.Context, args []string) int {
	fs := newFlagSet("get")
	outFile := fs.String("o", "", "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return usageError(c.stderr, fmt.Errorf("get: %w", err))
	}
	if len(pos) != 1 {
		return usageError(c.stderr, fmt.Errorf("get: want BUCKET/KEY"))
	}
	bucket, key, err := splitObject(pos[0])
	if err != nil {
		return usageError(c.stderr, fmt.Errorf("get: %w", err))
	}
	obj, err := c.client.GetObject(ctx, bucket, key)
	if err != nil {
		return c.fail(err)
	}
	defer obj.Body.Close()
	body, err := io.ReadAll(obj.Body)
	if err != nil {
		return c.fail(fmt.Errorf("get %s/%s: %w", bucket, key, err))
	}
	meta := map[string]any{
		"bucket": bucket, "key": key, "token": obj.Token, "etag": obj.ETag,
		"size": len(body), "content_type": obj.ContentType,
	}
	if *outFile != "" {
		if err := os.WriteFile(*outFile, body, 0o644); err != nil {
			return c.fail(fmt.Errorf("get: %w", err))
		}
		return c.print(meta, fmt.Sprintf("%s/%s: %d bytes to %s, token %d, etag %s", bucket, key, len(body), *outFile, obj.Token, obj.ETag))
	}
	if c.json {
		if utf8.Valid(body) {
			meta["body"] = string(body)
		} else {
			meta["body_base64"] = body // encoding/json writes []byte as base64
		}
		return c.print(meta, "")
	}
	if _, err := c.stdout.Write(body); err != nil {
		return c.fail(err)
	}
	return exitOK
}

// delete is `fencectl delete BUCKET/KEY [--token N]`.
func (c *cli) delete(ctx context.Context, args []string) int {
	fs := newFlagSet("delete")
	tokenText := c.tokenFlag(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return usageError(c.stderr, fmt.Errorf("delete: %w", err))
	}
	if len(pos) != 1 {
		return usageError(c.stderr, fmt.Errorf("delete: want BUCKET/KEY"))
	}
	bucket, key, err := splitObject(pos[0])
	if err != nil {
		return usageError(c.stderr, fmt.Errorf("delete: %w", err))
	}
	token, err := parseToken(*tokenText)
	if err != nil {
		return usageError(c.stderr, fmt.Errorf("delete: %w", err))
	}
	if err := c.client.DeleteObject(ctx, bucket, key, token); err != nil {
		return c.fail(err)
	}
	return c.print(map[string]any{"bucket": bucket, "key": key, "token": token, "deleted": true},
		fmt.Sprintf("deleted %s/%s with token %d", bucket, key, token))
}

// hwm is `fencectl hwm RESOURCE`.
func (c *cli) hwm(ctx context.Context, args []string) int {
	if len(args) != 1 || args[0] == "" {
		return usageError(c.stderr, fmt.Errorf("hwm: want RESOURCE, such as s3/dev/greeting"))
	}
	resource := api.Resource(args[0])
	hwm, err := c.client.HighWaterMark(ctx, resource)
	if err != nil {
		return c.fail(err)
	}
	text := fmt.Sprintf("%s: high-water mark %d", resource, hwm)
	if hwm == 0 {
		text = fmt.Sprintf("%s: no token accepted yet (high-water mark 0)", resource)
	}
	return c.print(api.Fence{Resource: resource, HighWaterMark: hwm}, text)
}

// locks is `fencectl locks NAME`.
func (c *cli) locks(ctx context.Context, args []string) int {
	if len(args) != 1 {
		return usageError(c.stderr, fmt.Errorf("locks: want NAME"))
	}
	if err := api.ValidateLockName(args[0]); err != nil {
		return usageError(c.stderr, fmt.Errorf("locks: %w", err))
	}
	st, err := c.client.LockState(ctx, args[0])
	if err != nil {
		return c.fail(err)
	}
	text := fmt.Sprintf("lock %s: free", st.Name)
	if st.Held {
		text = fmt.Sprintf("lock %s: held, %d waiting", st.Name, st.QueueLength-1)
	}
	return c.print(st, text)
}
