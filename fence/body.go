package fence

import (
	"errors"
	"fmt"
	"io"

	"fencegate/api"
)

// Watch reports whether the sender of a body stalled: the edge's
// transfer deadlines cut its reads off. Stalled returns nil, or why the
// body stopped arriving.
type Watch interface {
	Stalled() error
}

// Body is a write's body: in memory when it fits the buffer, so that it
// can be replayed after a lost race, or the request's own stream. Create
// it with ReadBody; the caller releases it when its request ends.
type Body struct {
	buf    *bufferedBody // non-nil when buffered
	stream io.Reader     // when not buffered
	size   int64
	// watch says whether the sender stalled; nil where the body is read
	// under no transfer deadlines.
	watch Watch
}

func (b *Body) replayable() bool { return b.buf != nil }

// stalled returns why the sender stopped sending the body (a chunk did
// not arrive in time), or nil.
func (b *Body) stalled() error {
	if b.watch == nil {
		return nil
	}
	return b.watch.Stalled()
}

func (b *Body) reader() io.Reader {
	if b.buf != nil {
		return b.buf.reader()
	}
	return b.stream
}

// Release gives a buffered body's memory back to the engine's budget for
// bodies; the request is done with it.
func (b *Body) Release() { b.buf.release() }

// ReadBody reads a write's body from, of n bytes (-1: unknown), under
// watch's transfer deadlines (nil: none, or from reads through them
// already unbeknown to it). It buffers bodies up to Config.BufferBytes
// and lets larger ones stream. A body of unknown length must fit the
// buffer (the store needs the length up front), else
// api.ErrLengthRequired. A buffered body is read as it arrives, in chunks
// reserved from the budget of all requests' bodies
// (Config.BufferBudgetBytes), never allocated at its length up front: a
// client that announces a large body and sends nothing holds one chunk.
// When the budget has no room, the answer is api.ErrGatewayBusy and
// nothing is written. The caller releases the body when the request ends.
func (e *Engine) ReadBody(from io.Reader, n int64, watch Watch) (*Body, error) {
	if n > e.cfg.MaxBodyBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", api.ErrBodyTooLarge, n, e.cfg.MaxBodyBytes)
	}
	if n > e.cfg.BufferBytes {
		return &Body{stream: from, size: n, watch: watch}, nil
	}
	buf, err := e.bufferWhole(from, n, e.cfg.BufferBytes, watch)
	switch {
	case errors.Is(err, api.ErrBodyTooLarge):
		// Of unknown length, and over the whole budget, which holds at
		// least a buffer: over the buffer.
		return nil, e.lengthRequired()
	case err != nil:
		return nil, err
	case buf.size > e.cfg.BufferBytes: // of unknown length
		buf.release()
		return nil, e.lengthRequired()
	}
	return &Body{buf: buf, size: buf.size}, nil
}

// lengthRequired is the refusal of a body of unknown length over
// Config.BufferBytes.
func (e *Engine) lengthRequired() error {
	return fmt.Errorf("%w: a body over %d bytes needs a Content-Length", api.ErrLengthRequired, e.cfg.BufferBytes)
}

// Buffered is a body held whole in memory reserved from the engine's
// budget, as BufferWhole reads it.
type Buffered struct{ b *bufferedBody }

// Size is the body's length in bytes.
func (b *Buffered) Size() int64 { return b.b.size }

// Bytes returns the body's bytes, joined into one slice.
func (b *Buffered) Bytes() []byte { return b.b.bytes() }

// Release gives the body's memory back to the budget. A nil body has
// nothing to give.
func (b *Buffered) Release() {
	if b != nil {
		b.b.release()
	}
}

// BufferWhole reads a body of n bytes (-1: unknown) from into memory
// reserved from the engine's budget of buffered bodies, under watch's
// transfer deadlines (nil: none): exactly n bytes, else
// api.ErrInvalidRequest; of unknown length, up to its end or to one byte
// past max, which the caller refuses. A body that finds no room is
// api.ErrGatewayBusy, one larger than the whole budget
// api.ErrBodyTooLarge; one whose sender stalled says so.
func (e *Engine) BufferWhole(from io.Reader, n, max int64, watch Watch) (*Buffered, error) {
	buf, err := e.bufferWhole(from, n, max, watch)
	if err != nil {
		return nil, err
	}
	return &Buffered{b: buf}, nil
}

func (e *Engine) bufferWhole(from io.Reader, n, max int64, watch Watch) (*bufferedBody, error) {
	if n > e.bodies.limit {
		return nil, e.bodies.tooLarge()
	}
	limit, first := n, int64(bodyChunkBytes)
	if n < 0 {
		limit, first = max+1, firstChunkBytes
	}
	buf, err := e.bufferBody(from, limit, first)
	if err != nil {
		return nil, bodyReadError(err, watch)
	}
	if n >= 0 && buf.size != n {
		buf.release()
		return nil, bodyReadError(fmt.Errorf("%d bytes of %d", buf.size, n), watch)
	}
	return buf, nil
}

// bodyReadError is the answer to a failed read of a body being buffered,
// read under watch's transfer deadlines (nil: none): the budget's
// refusals as they are (503 gateway-busy when there is no room now, 413
// when there is none ever), else a 400 that says whether the sender
// stalled.
func bodyReadError(err error, watch Watch) error {
	if errors.Is(err, api.ErrGatewayBusy) || errors.Is(err, api.ErrBodyTooLarge) {
		return err
	}
	if watch != nil {
		if stall := watch.Stalled(); stall != nil {
			return fmt.Errorf("%w: %w", api.ErrInvalidRequest, stall)
		}
	}
	return fmt.Errorf("%w: reading body: %w", api.ErrInvalidRequest, err)
}

// bufferBody reads up to max bytes of body into memory reserved from the
// engine's budget (see readInto), telling the monitor of the refusals
// when the budget has no room. Its errors are readInto's, for
// bodyReadError to map.
func (e *Engine) bufferBody(body io.Reader, max, first int64) (*bufferedBody, error) {
	buf, err := readInto(e.bodies, body, max, first)
	if errors.Is(err, api.ErrGatewayBusy) {
		e.monitor.BodyRefused()
	}
	if err != nil {
		return nil, err
	}
	return buf, nil
}
