package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"fencegate/api"
)

// rawConn is a minimal HTTP/1.1 client on one keep-alive connection, for
// the stale cells: a request is one write, its answer one or two reads,
// as in wrk. On two cores shared with the gateway, Go's net/http client
// costs about as much CPU per request as the gateway's refusal itself,
// and would cap the rate the gateway can be shown to sustain.
type rawConn struct {
	addr string // host:port
	conn net.Conn
	br   *bufio.Reader
	buf  []byte // the request being sent
	resp []byte // the last answer's body, until the next request
}

func (c *rawConn) Close() error {
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}

// put sends PUT path with the token and body and returns the status and
// the answer's body (at most 64 KiB), valid until the next put.
func (c *rawConn) put(ctx context.Context, path, token string, b *body, size int64) (int, []byte, error) {
	if c.conn == nil {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return 0, nil, err
		}
		c.conn, c.br = conn, bufio.NewReaderSize(conn, 8<<10)
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = c.conn.SetDeadline(deadline)
	} else {
		_ = c.conn.SetDeadline(time.Now().Add(time.Minute))
	}
	c.buf = append(c.buf[:0], "PUT "...)
	c.buf = append(c.buf, path...)
	c.buf = append(c.buf, " HTTP/1.1\r\nHost: "...)
	c.buf = append(c.buf, c.addr...)
	c.buf = append(c.buf, "\r\nContent-Length: "...)
	c.buf = strconv.AppendInt(c.buf, size, 10)
	c.buf = append(c.buf, "\r\n"+api.HeaderFenceToken+": "...)
	c.buf = append(c.buf, token...)
	c.buf = append(c.buf, "\r\n\r\n"...)
	if size <= 64<<10 {
		c.buf = append(c.buf, b.prefix[:min(prefixBytes, size)]...)
		c.buf = append(c.buf, b.base[min(prefixBytes, size):]...)
		if _, err := c.conn.Write(c.buf); err != nil {
			c.Close()
			return 0, nil, err
		}
	} else {
		if _, err := c.conn.Write(c.buf); err != nil {
			c.Close()
			return 0, nil, err
		}
		if _, err := io.Copy(c.conn, b); err != nil {
			c.Close()
			return 0, nil, err
		}
	}
	status, respBody, keep, err := c.readResponse()
	if err != nil || !keep {
		c.Close()
	}
	return status, respBody, err
}

// readResponse reads one answer with a Content-Length body.
func (c *rawConn) readResponse() (status int, respBody []byte, keepAlive bool, err error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, fmt.Errorf("read status line: %w", err)
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	length, keepAlive := -1, true
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, fmt.Errorf("read header: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, nil, false, fmt.Errorf("bad header %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, nil, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			keepAlive = false
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, nil, false, errors.New("chunked answers are not supported by the raw client")
		}
	}
	if length < 0 || length > 64<<10 {
		return 0, nil, false, fmt.Errorf("answer without a Content-Length up to 64 KiB (%d)", length)
	}
	if cap(c.resp) < length {
		c.resp = make([]byte, length)
	}
	c.resp = c.resp[:length]
	if _, err := io.ReadFull(c.br, c.resp); err != nil {
		return 0, nil, false, fmt.Errorf("read body: %w", err)
	}
	return status, c.resp, keepAlive, nil
}
