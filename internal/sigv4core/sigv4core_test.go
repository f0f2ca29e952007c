package sigv4core_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"testing"

	"fencegate/internal/sigv4core"
)

// TestAWSExample computes AWS's published example of a header-signed
// GET (the S3 API reference's signature calculation for GET /test.txt
// with Range: bytes=0-9) from the package's pieces: the canonical URI,
// the header values as sent (with the spaces the example's request
// carries around them), the string to sign and the signing key.
func TestAWSExample(t *testing.T) {
	const (
		secret        = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
		emptySHA256   = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
		wantHash      = "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"
		wantSignature = "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
	)
	u, err := url.Parse("https://examplebucket.s3.amazonaws.com/test.txt")
	if err != nil {
		t.Fatal(err)
	}
	var canonical []byte
	canonical = append(canonical, "GET\n"...)
	canonical = append(canonical, sigv4core.CanonicalURI(u)...)
	canonical = append(canonical, "\n\nhost:"...)
	canonical = append(canonical, sigv4core.StripExcessSpaces(u.Host)...)
	canonical = append(canonical, "\nrange:"...)
	canonical = sigv4core.AppendHeaderValues(canonical, []string{"bytes=0-9 "})
	canonical = append(canonical, "\nx-amz-content-sha256:"...)
	canonical = sigv4core.AppendHeaderValues(canonical, []string{emptySHA256})
	canonical = append(canonical, "\nx-amz-date:"...)
	canonical = sigv4core.AppendHeaderValues(canonical, []string{" 20130524T000000Z "})
	canonical = append(canonical, "\n\nhost;range;x-amz-content-sha256;x-amz-date\n"+emptySHA256...)
	hash := sha256.Sum256(canonical)
	if got := hex.EncodeToString(hash[:]); got != wantHash {
		t.Fatalf("canonical request hashes to %s; want %s; it is:\n%s", got, wantHash, canonical)
	}

	stringToSign := sigv4core.AppendStringToSign(nil, "20130524T000000Z", "us-east-1", &hash)
	want := "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n" + wantHash
	if string(stringToSign) != want {
		t.Errorf("AppendStringToSign = %q; want %q", stringToSign, want)
	}
	key := sigv4core.DeriveKey(secret, "20130524", "us-east-1")
	if got := hex.EncodeToString(sigv4core.HMACSHA256(key, string(stringToSign))); got != wantSignature {
		t.Errorf("signature %s; want %s", got, wantSignature)
	}
	if got := string(sigv4core.AppendScope([]byte("x "), "20130524", "us-east-1")); got != "x 20130524/us-east-1/s3/aws4_request" {
		t.Errorf("AppendScope = %q", got)
	}
}

func TestStripExcessSpaces(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"a", "a"},
		{"  a  ", "a"},
		{"a  b   c", "a b c"},
		{" a b ", "a b"},
		{"a\t\tb", "a\t\tb"},        // spaces only
		{"\t a  b \t", "\t a b \t"}, // tabs at the ends stay
		{"     ", ""},
	}
	for _, tt := range tests {
		if got := sigv4core.StripExcessSpaces(tt.in); got != tt.want {
			t.Errorf("StripExcessSpaces(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestAppendHeaderValues(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   string
	}{
		{"one value", []string{"text/plain"}, "text/plain"},
		{"spaces around and inside", []string{"  text/plain;  charset=utf-8 "}, "text/plain; charset=utf-8"},
		{"other white space at the ends", []string{"\t a  b \t"}, "a b"},
		{"several values", []string{"a", " b ", "c  d"}, "a,b,c d"},
		{"empty value", []string{""}, ""},
		{"no values", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sigv4core.AppendHeaderValues([]byte("h:"), tt.values)
			if string(got) != "h:"+tt.want {
				t.Errorf("AppendHeaderValues(%q) = %q; want %q", tt.values, got, "h:"+tt.want)
			}
		})
	}
}

func TestCanonicalURI(t *testing.T) {
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	tests := []struct {
		name string
		u    *url.URL
		want string
	}{
		{"path", parse("http://h/b/k"), "/b/k"},
		{"no path", parse("http://h"), "/"},
		{"escapes as sent, not escaped again", parse("http://h/b/a%20b/c+d%2Fe"), "/b/a%20b/c+d%2Fe"},
		{"slashes kept", parse("http://h//b//k/"), "//b//k/"},
		{"path not yet escaped", &url.URL{Scheme: "http", Host: "h", Path: "/b/a b"}, "/b/a%20b"},
		{"opaque", &url.URL{Scheme: "http", Opaque: "//h/b/k%2F?x=1"}, "/b/k%2F"},
		{"opaque without path", &url.URL{Scheme: "http", Opaque: "//h"}, "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sigv4core.CanonicalURI(tt.u); got != tt.want {
				t.Errorf("CanonicalURI(%#v) = %q; want %q", tt.u, got, tt.want)
			}
		})
	}
}

func TestIgnoredHeader(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"Authorization", true},
		{"authorization", true},
		{"User-Agent", true},
		{"X-Amzn-Trace-Id", true},
		{"x-amzn-trace-id", true},
		{"Expect", true},
		{"Transfer-Encoding", true},
		{"Content-Length", false},
		{"Host", false},
		{"X-Amz-Date", false},
		{"Authorizatio", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := sigv4core.IgnoredHeader(tt.name); got != tt.want {
			t.Errorf("IgnoredHeader(%q) = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// TestKeyCache: a key is derived once for the same access key id,
// secret, day and region, and derived again when any of them changes (a
// rotated secret at once); access key ids keep keys of their own.
func TestKeyCache(t *testing.T) {
	var c sigv4core.KeyCache
	get := func(id, secret, day, region string) *sigv4core.Key {
		t.Helper()
		k := c.Get(id, secret, day, region)
		if want := sigv4core.DeriveKey(secret, day, region); !bytes.Equal(k.Bytes(), want) {
			t.Fatalf("Get(%q, %q, %q, %q) = %x; want %x", id, secret, day, region, k.Bytes(), want)
		}
		return k
	}
	first := get("AK1", "s1", "20261203", "us-east-1")
	if again := get("AK1", "s1", "20261203", "us-east-1"); again != first {
		t.Error("the same inputs derived the key again")
	}
	other := get("AK2", "s2", "20261203", "us-east-1")
	if again := get("AK1", "s1", "20261203", "us-east-1"); again != first {
		t.Error("another access key id replaced AK1's key")
	}
	if again := get("AK2", "s2", "20261203", "us-east-1"); again != other {
		t.Error("AK2's key was derived again")
	}
	for _, change := range []struct{ name, secret, day, region string }{
		{"rotated secret", "s1-new", "20261203", "us-east-1"},
		{"next day", "s1-new", "20261204", "us-east-1"},
		{"other region", "s1-new", "20261204", "eu-west-3"},
		{"back to the first", "s1", "20261203", "us-east-1"},
	} {
		if k := get("AK1", change.secret, change.day, change.region); k == first {
			t.Errorf("%s: the cached key was given again", change.name)
		}
	}
}
