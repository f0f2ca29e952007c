package fence

import (
	"bytes"
	"fmt"
	"io"
	"sync/atomic"

	"fencegate/api"
	"fencegate/internal/iofill"
)

// bodyChunkBytes is the most memory a buffered body takes at a time: a
// body is read into chunks of this size, each reserved from the budget
// before it is allocated, so that a request holds about the bytes it has
// sent, never what its Content-Length announces.
const bodyChunkBytes = 64 << 10

// firstChunkBytes is the first chunk of a body of unknown length
// (chunked): chunks double from here up to bodyChunkBytes, so that a
// small chunked body does not reserve a whole chunk. A body of known
// length starts with a whole chunk, or its length if smaller.
const firstChunkBytes = 4 << 10

// bodyBudget bounds the bytes of request bodies that all requests
// together hold in memory (Config.BufferBudgetBytes). Without it, N
// clients that announce a body up to Config.BufferBytes and then send it
// slowly, or not at all, would hold N times the buffer. Reservations are
// made as bytes arrive and released when the request ends.
type bodyBudget struct {
	limit int64
	used  atomic.Int64
}

// reserve takes n bytes from the budget, or reports false, having taken
// nothing, when they do not fit.
func (b *bodyBudget) reserve(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// release gives back n bytes reserved before.
func (b *bodyBudget) release(n int64) { b.used.Add(-n) }

// tooLarge is the refusal of a body that the whole budget cannot hold:
// api.ErrBodyTooLarge, not busy, for a retry would be refused again,
// however idle the gateway.
func (b *bodyBudget) tooLarge() error {
	return fmt.Errorf("%w: over the %d bytes this gateway holds in memory for all request bodies together (buffer_budget_bytes)", api.ErrBodyTooLarge, b.limit)
}

// errBudgetExhausted is the refusal of a body that the budget has no room
// for. It is an api.ErrGatewayBusy: 503 with Retry-After.
var errBudgetExhausted = fmt.Errorf("%w: the memory for buffered request bodies is in use by other requests", api.ErrGatewayBusy)

// bufferedBody is a body read into chunks reserved from a budget.
type bufferedBody struct {
	budget   *bodyBudget
	chunks   [][]byte
	reserved int64
	size     int64
}

// readInto reads r into chunks reserved from budget, up to its end or to
// max bytes, whichever comes first. The first chunk is first bytes long
// (at most max); each next one doubles, up to bodyChunkBytes. It returns
// the body, which the caller releases, or errBudgetExhausted (no room
// now), or tooLarge's error (no room ever), or the read's error, having
// released what it reserved.
func readInto(budget *bodyBudget, r io.Reader, max, first int64) (*bufferedBody, error) {
	b := &bufferedBody{budget: budget}
	next := min(first, bodyChunkBytes)
	for b.size < max {
		size := min(next, max-b.size, budget.limit-b.reserved)
		next = min(2*next, bodyChunkBytes)
		if size == 0 {
			// The body holds the whole budget: it is refused unless it
			// ends here (a body of unknown length, read to its end).
			var one [1]byte
			n, err := iofill.Fill(r, one[:])
			switch {
			case n == 0 && err == io.EOF:
				return b, nil
			case n == 0 && err != nil:
			default:
				err = budget.tooLarge()
			}
			b.release()
			return nil, err
		}
		if !budget.reserve(size) {
			b.release()
			return nil, errBudgetExhausted
		}
		b.reserved += size
		buf := make([]byte, size)
		n, err := iofill.Fill(r, buf)
		if n > 0 {
			b.chunks = append(b.chunks, buf[:n])
			b.size += int64(n)
		}
		switch {
		case err == io.EOF:
			return b, nil
		case err != nil:
			b.release()
			return nil, err
		}
	}
	return b, nil
}

// reader reads the body from its start; each call starts again.
func (b *bufferedBody) reader() io.Reader {
	if len(b.chunks) == 1 {
		return bytes.NewReader(b.chunks[0])
	}
	readers := make([]io.Reader, len(b.chunks))
	for i, c := range b.chunks {
		readers[i] = bytes.NewReader(c)
	}
	return io.MultiReader(readers...)
}

// bytes returns the body as one slice: its only chunk, or its chunks
// joined into one, which the body's reservation still covers (it is at
// least the body's size). nil for an empty or nil body.
func (b *bufferedBody) bytes() []byte {
	if b == nil {
		return nil
	}
	switch len(b.chunks) {
	case 0:
		return nil
	case 1:
		return b.chunks[0]
	}
	joined := make([]byte, 0, b.size)
	for _, c := range b.chunks {
		joined = append(joined, c...)
	}
	b.chunks = [][]byte{joined}
	return joined
}

// release gives the body's memory back to the budget. The body must not
// be read after.
func (b *bufferedBody) release() {
	if b == nil || b.reserved == 0 {
		return
	}
	b.budget.release(b.reserved)
	b.reserved = 0
	b.chunks = nil
}
