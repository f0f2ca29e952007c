package s3

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"maps"
	"net/url"
	"strconv"
	"strings"

	"fencegate/api"
	"fencegate/internal/sigv4core"
)

// PresignUploadParts returns the tickets of parts, in order: parts of one
// multipart upload (one Path, UploadID and Expires), each with its own
// number and size, all signed at one time, so that they expire together.
// Parts of more than one upload are an api.ErrInvalidRequest, as is a
// part that does not validate.
//
// The first ticket is the SDK's (PresignUploadPart). The others are its
// URL with their own part number and size, signed again by a partSigner,
// which computes what the SDK's signer would and is used only once it
// has signed the first part to the byte as the SDK did; otherwise every
// part is the SDK's. It exists for its cost: the SDK presigns a part
// through its whole request pipeline, which made a ticket of 10,000
// parts about a second of the gateway's CPU, and a flood of such tickets
// the cheapest way to take its cores (fencebench abuse, ticket-flood);
// BenchmarkPresignUploadParts compares the two.
func (c *Client) PresignUploadParts(ctx context.Context, parts []api.PartTicketRequest) ([]api.Ticket, error) {
	tickets := make([]api.Ticket, len(parts))
	if len(parts) == 0 {
		return tickets, nil
	}
	signingTime := c.now()
	var ps *partSigner
	for i, r := range parts {
		if r.Path != parts[0].Path || r.UploadID != parts[0].UploadID || r.Expires != parts[0].Expires {
			return nil, fmt.Errorf("s3 presign parts: %w: parts of more than one upload", api.ErrInvalidRequest)
		}
		if ps != nil {
			if err := r.Validate(); err != nil {
				return nil, fmt.Errorf("s3 presign part %s/%s: %w", r.Path.Bucket, r.Path.Key, err)
			}
			tickets[i] = ps.sign(r.PartNumber, r.Size)
			continue
		}
		t, err := c.presignUploadPartAt(ctx, r, signingTime)
		if err != nil {
			return nil, err
		}
		tickets[i] = t
		if i == 0 && len(parts) > 1 {
			ps = c.newPartSigner(ctx, r, t)
		}
	}
	return tickets, nil
}

// partSigner signs presigned UploadParts of one upload, at one time, as
// the SDK's v4 signer does (with S3's settings: the path as sent, an
// unsigned payload), from a part the SDK presigned: the canonical
// request is the SDK's URL (its path, and its query, which the SDK
// writes already canonical, before X-Amz-Signature) with another
// partNumber, and the headers it signed, host and content-length, with
// another length.
type partSigner struct {
	// base is the URL up to its query, "?" included.
	base string
	// queryHead and queryTail are the canonical query before and after
	// the part number.
	queryHead, queryTail string
	uri, host            string
	amzDate, region      string
	// mac is an HMAC keyed with the signing key, reset for each part:
	// keying one costs more than the rest of a part's signature. A
	// partSigner signs one part at a time.
	mac      hash.Hash
	template api.Ticket
}

// newPartSigner returns the partSigner of the upload of r, from t, the
// SDK's ticket of r, or nil when it cannot sign r exactly as t: a URL or
// headers of another shape than it knows, or credentials that are no
// longer the ones t was signed with.
func (c *Client) newPartSigner(ctx context.Context, r api.PartTicketRequest, t api.Ticket) *partSigner {
	u, err := url.Parse(t.URL)
	if err != nil {
		return nil
	}
	query, _, ok := strings.Cut(u.RawQuery, "&X-Amz-Signature=")
	if !ok {
		return nil
	}
	number := "partNumber=" + strconv.Itoa(int(r.PartNumber))
	at := strings.Index("&"+query+"&", "&"+number+"&")
	if at < 0 {
		return nil
	}
	values, err := url.ParseQuery(query)
	if err != nil || values.Get("X-Amz-SignedHeaders") != "content-length;host" {
		return nil
	}
	scope := strings.Split(values.Get("X-Amz-Credential"), "/")
	amzDate := values.Get("X-Amz-Date")
	if len(scope) != 5 || len(amzDate) != len(sigv4core.DateFormat) || scope[1] != amzDate[:len(sigv4core.DayFormat)] || scope[3] != sigv4core.Service {
		return nil
	}
	creds, err := c.s3.Options().Credentials.Retrieve(ctx)
	if err != nil || creds.AccessKeyID != scope[0] {
		return nil
	}
	host := u.Host
	if port := portOf(host); port != "" && isDefaultPort(u.Scheme, port) {
		host = stripPort(host) // the SDK signs Host without the default port, as sigV4.sign does
	}
	ps := &partSigner{
		base:      t.URL[:strings.IndexByte(t.URL, '?')+1],
		queryHead: query[:at+len("partNumber=")],
		queryTail: query[at+len(number):],
		uri:       sigv4core.CanonicalURI(u),
		host:      host,
		amzDate:   amzDate,
		region:    scope[2],
		mac:       hmac.New(sha256.New, sigv4core.DeriveKey(creds.SecretAccessKey, scope[1], scope[2])),
		template:  t,
	}
	if again := ps.sign(r.PartNumber, r.Size); again.URL != t.URL || again.Method != t.Method || !maps.Equal(again.Headers, t.Headers) || !again.ExpiresAt.Equal(t.ExpiresAt) {
		return nil
	}
	return ps
}

// sign returns the ticket of part number, of size bytes.
func (ps *partSigner) sign(number int32, size int64) api.Ticket {
	length := strconv.FormatInt(size, 10)
	buf := make([]byte, 0, 1024)
	buf = append(buf, "PUT\n"...)
	buf = append(buf, ps.uri...)
	buf = append(buf, '\n')
	queryStart := len(buf)
	buf = append(buf, ps.queryHead...)
	buf = strconv.AppendInt(buf, int64(number), 10)
	buf = append(buf, ps.queryTail...)
	query := string(buf[queryStart:])
	buf = append(buf, "\ncontent-length:"...)
	buf = append(buf, length...)
	buf = append(buf, "\nhost:"...)
	buf = append(buf, ps.host...)
	buf = append(buf, "\n\ncontent-length;host\nUNSIGNED-PAYLOAD"...)
	canonicalHash := sha256.Sum256(buf)
	buf = sigv4core.AppendStringToSign(buf[:0], ps.amzDate, ps.region, &canonicalHash)
	ps.mac.Reset()
	ps.mac.Write(buf)
	var sum [sha256.Size]byte
	t := ps.template
	t.URL = ps.base + query + "&X-Amz-Signature=" + hex.EncodeToString(ps.mac.Sum(sum[:0]))
	t.Headers = map[string]string{"Content-Length": length}
	return t
}
