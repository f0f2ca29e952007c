package api

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends p as JSON to b: the same bytes as json.Marshal(p),
// without its reflection. The gateway answers every refusal with a
// problem, and a stale refusal is the cheapest request it serves, so the
// encoding is a visible part of its cost.
func (p Problem) AppendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = AppendJSONString(b, p.Type)
	b = append(b, `,"title":`...)
	b = AppendJSONString(b, p.Title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	if p.Detail != "" {
		b = append(b, `,"detail":`...)
		b = AppendJSONString(b, p.Detail)
	}
	if p.Instance != "" {
		b = append(b, `,"instance":`...)
		b = AppendJSONString(b, p.Instance)
	}
	if p.Resource != "" {
		b = append(b, `,"resource":`...)
		b = AppendJSONString(b, string(p.Resource))
	}
	if p.Token != 0 {
		b = append(b, `,"token":`...)
		b = strconv.AppendUint(b, uint64(p.Token), 10)
	}
	if p.HighWaterMark != 0 {
		b = append(b, `,"high_water_mark":`...)
		b = strconv.AppendUint(b, uint64(p.HighWaterMark), 10)
	}
	if p.Retryable {
		b = append(b, `,"retryable":true`...)
	}
	if p.RequestID != "" {
		b = append(b, `,"request_id":`...)
		b = AppendJSONString(b, p.RequestID)
	}
	return append(b, '}')
}

// AppendJSONString appends s to b as a JSON string, escaped exactly as
// encoding/json escapes it: quote, backslash and control characters; <, >
// and & (HTML safety); invalid UTF-8 as U+FFFD; U+2028 and U+2029. The
// problem bodies and the event feed's events write their strings with it,
// without reflection.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
