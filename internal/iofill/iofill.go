// Package iofill reads a reader into a buffer a chunk at a time, for the
// engine's buffered bodies and the gateway's transfers to clients alike.
package iofill

import "io"

// Fill reads r into buf until buf is full or r ends. Unlike io.ReadFull,
// it returns io.EOF for an end before buf is full, and every other error
// as it is (a body cut short is io.ErrUnexpectedEOF, not an end).
func Fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
