package main

import (
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
)

// prefixBytes is the part of each body that is unique to its request.
const prefixBytes = 16

// bodySource makes the request bodies of one size. Every body is the same
// random block except its first 16 bytes, which hold the worker and a
// counter: each write then has its own ETag (the MD5 of its bytes). Equal
// bodies would have equal ETags, and a conditional write would succeed on
// top of another writer's identical version, hiding lost races.
type bodySource struct {
	size int64
	base []byte // shared and never written after newBodySource
}

func newBodySource(size int64) *bodySource {
	base := make([]byte, size)
	rng := rand.New(rand.NewPCG(uint64(size), 1))
	for i := 0; i+8 <= len(base); i += 8 {
		binary.LittleEndian.PutUint64(base[i:], rng.Uint64())
	}
	return &bodySource{size: size, base: base}
}

// next returns worker w's next body.
func (w *worker) nextBody() *body {
	w.seq++
	b := &body{base: w.body.base}
	binary.BigEndian.PutUint64(b.prefix[:8], uint64(w.id))
	binary.BigEndian.PutUint64(b.prefix[8:], w.seq)
	return b
}

// body is one request's body: an io.ReadSeeker over the shared block with
// its own first bytes, so that SDKs can rewind it and no request copies
// the block.
type body struct {
	prefix [prefixBytes]byte
	base   []byte
	off    int64
}

func (b *body) Read(p []byte) (int, error) {
	if b.off >= int64(len(b.base)) {
		return 0, io.EOF
	}
	n := 0
	if b.off < prefixBytes {
		n = copy(p, b.prefix[b.off:min(prefixBytes, int64(len(b.base)))])
	}
	n += copy(p[n:], b.base[b.off+int64(n):])
	b.off += int64(n)
	return n, nil
}

func (b *body) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += b.off
	case io.SeekEnd:
		offset += int64(len(b.base))
	default:
		return 0, errors.New("body: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("body: negative position")
	}
	b.off = offset
	return offset, nil
}

// generator streams n bytes made of a repeated 1 MiB random block, for
// uploads larger than the memory it is fair to hold.
type generator struct {
	block     []byte
	remaining int64
	pos       int
}

func newGenerator(n int64) *generator {
	return &generator{block: newBodySource(1 << 20).base, remaining: n}
}

func (g *generator) Read(p []byte) (int, error) {
	if g.remaining <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.remaining {
		p = p[:g.remaining]
	}
	n := 0
	for n < len(p) {
		c := copy(p[n:], g.block[g.pos:])
		n += c
		g.pos = (g.pos + c) % len(g.block)
	}
	g.remaining -= int64(n)
	return n, nil
}
