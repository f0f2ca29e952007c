package edge

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"fencegate/internal/iofill"
)

// transferChunkBytes is the chunk of Config.TransferChunkTimeout: object
// bodies move to and from clients at least this many bytes per timeout.
const transferChunkBytes = 64 << 10

// Directions of a slow client, the label of fencegate_slow_clients_cut_total.
const (
	directionDownload = "download"
	directionUpload   = "upload"
)

// CopyToClient copies an object's body to the client in chunks of
// transferChunkBytes, each under a write deadline of the chunk timeout,
// so that a client that stops reading is cut off within it rather than
// holding the body, and with it an S3 connection, until the server's
// write timeout (minutes) ends the request. The deadlines replace the
// server's for the rest of the response (net/http clears the last one
// once the response is finished). Where the connection cannot take
// deadlines, it is a plain copy.
//
// The caller closes body, which gives back its S3 connection.
func (e *Edge) CopyToClient(w http.ResponseWriter, body io.Reader) (int64, error) {
	rc := http.NewResponseController(w)
	timeout := e.cfg.TransferChunkTimeout
	if err := rc.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return io.Copy(w, body) // a ResponseWriter without deadlines
	}
	buf := make([]byte, transferChunkBytes)
	var written int64
	for {
		n, readErr := iofill.Fill(body, buf)
		if n > 0 {
			if err := rc.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
				return written, err
			}
			m, err := w.Write(buf[:n])
			written += int64(m)
			if err == nil {
				err = rc.Flush() // the chunk's last bytes, under its deadline
			}
			if err != nil {
				if isTimeout(err) {
					e.metrics.slowClients.WithLabelValues(directionDownload).Inc()
				}
				return written, err
			}
		}
		if readErr == io.EOF {
			return written, nil
		}
		if readErr != nil {
			return written, readErr
		}
	}
}

// isTimeout reports whether err is a deadline's.
func isTimeout(err error) bool {
	var timeout interface{ Timeout() bool }
	return errors.As(err, &timeout) && timeout.Timeout()
}

// ClientBody is a request body read under a read deadline per chunk of
// transferChunkBytes: each chunk must arrive within the chunk timeout,
// counted from the first read of the chunk, so that a sender that stalls
// is cut off within it rather than holding an S3 request (and its
// connection) open until the server's read timeout. Time before the first
// read (the observation and the fence check) does not count. The server
// cancels the request's context when a read fails, which ends the S3
// request too. The deadlines replace the server's whole-request read
// timeout for the body.
type ClientBody struct {
	body    io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	m       *metrics
	left    int  // bytes still to come in the current chunk; 0: start one
	stalled bool // a read failed on its deadline
	done    bool // the body ended and the deadline is cleared
}

// ClientBody returns r's body under the transfer deadlines, or nil
// where the connection cannot take read deadlines (the body is then
// r.Body itself, read under the server's timeouts). It clears the
// connection's read deadline (the server's whole-request timeout): the
// chunks' deadlines take its place. A door calls it before anything
// reads the body.
func (e *Edge) ClientBody(w http.ResponseWriter, r *http.Request) *ClientBody {
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		return nil
	}
	return &ClientBody{body: r.Body, rc: rc, timeout: e.cfg.TransferChunkTimeout, m: e.metrics}
}

// WatchBody puts r's body under the transfer deadlines (ClientBody),
// where the connection takes them: a sender that stalls is cut off (its
// read fails) rather than hold an S3 connection.
func (e *Edge) WatchBody(w http.ResponseWriter, r *http.Request) {
	if client := e.ClientBody(w, r); client != nil {
		r.Body = client
	}
}

// Read reads from the body, setting a deadline at the first read of each
// chunk. At the end of the body, or on an error of the client's, it
// clears the deadline and sets no more: once the body is read the server
// reads the connection in the background (to notice a client that goes
// away), and a deadline that passed there would cancel the request while
// it writes to S3. (net/http clears the deadline itself when it starts
// that read; clearing it here too keeps that from resting on its
// internals.) A sender that stalled is read no more: its deadline stays
// passed. Cleared, net/http would read up to 256 KiB more of the unread
// body, with no deadline, before it writes the answer, and a client that
// sends nothing more would hold the connection, and the request's
// goroutine, for ever without an answer. With the deadline passed that
// read fails at once; the answer is written and the connection closed.
// (The background read never starts: it waits for the body's end.)
func (b *ClientBody) Read(p []byte) (int, error) {
	if b.done {
		return b.body.Read(p)
	}
	if b.left == 0 {
		if err := b.rc.SetReadDeadline(time.Now().Add(b.timeout)); err != nil {
			return 0, err
		}
		b.left = transferChunkBytes
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= n
	if err != nil {
		b.done = true
		if isTimeout(err) {
			b.stalled = true
			b.m.slowClients.WithLabelValues(directionUpload).Inc()
			return n, err
		}
		b.rc.SetReadDeadline(time.Time{}) //nolint:errcheck // supported: set in ClientBody
	}
	return n, err
}

// Stalled returns why the sender stopped sending the body (a chunk did
// not arrive within Config.TransferChunkTimeout), or nil; nil too for a
// nil body, read under no deadlines.
func (b *ClientBody) Stalled() error {
	if b == nil || !b.stalled {
		return nil
	}
	return errBodyStalled(b.timeout)
}

// errBodyStalled says why a body that stopped arriving was refused.
func errBodyStalled(timeout time.Duration) error {
	return fmt.Errorf("the body stopped arriving: no %d KiB within %v", transferChunkBytes>>10, timeout)
}

// Close closes the body.
func (b *ClientBody) Close() error { return b.body.Close() }
