// Package s3checksum owns S3's checksum algorithms: the names S3 gives
// them (x-amz-checksum-<name>, x-amz-checksum-algorithm, x-amz-trailer) and
// the hash each computes, in the encoding S3 sends them (base64 of the
// digest's bytes, integers big-endian). The S3 front door verifies a
// client's checksums with these hashes, and the S3 backend computes a
// part's checksum with them; one table keeps the two agreeing with each
// other and with S3.
package s3checksum

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"hash/crc32"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/minio/crc64nvme"
	"github.com/zeebo/xxh3"
)

// Algorithm is one S3 checksum algorithm.
type Algorithm struct {
	// Name is S3's name of the algorithm, upper case, as in
	// x-amz-checksum-algorithm ("CRC32", "XXHASH128"); the header of its
	// value is x-amz-checksum- and the name in lower case.
	Name string
	// New returns a new hash of the algorithm.
	New func() hash.Hash
}

// Algorithms are the algorithms of S3's checksums, as the AWS SDKs name
// them (aws-sdk-go-v2's types.ChecksumAlgorithm).
var Algorithms = []Algorithm{
	{"CRC32", func() hash.Hash { return crc32.NewIEEE() }},
	{"CRC32C", func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) }},
	{"CRC64NVME", func() hash.Hash { return crc64nvme.New() }},
	{"SHA1", sha1.New},
	{"SHA256", sha256.New},
	{"SHA512", sha512.New},
	{"MD5", md5.New},
	{"XXHASH64", func() hash.Hash { return xxhash.New() }},
	{"XXHASH3", func() hash.Hash { return xxh3.New() }},
	{"XXHASH128", func() hash.Hash { return xxh3.New128() }},
}

// Lookup returns the algorithm named name, in any case ("crc32",
// "CRC32"), or false when S3 knows none of that name.
func Lookup(name string) (Algorithm, bool) {
	for _, a := range Algorithms {
		if strings.EqualFold(a.Name, name) {
			return a, true
		}
	}
	return Algorithm{}, false
}

// Names is the list of the algorithms' names for a message: "CRC32,
// CRC32C, ..., XXHASH3 or XXHASH128".
func Names() string {
	var b strings.Builder
	for i, a := range Algorithms {
		switch {
		case i == len(Algorithms)-1:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString(a.Name)
	}
	return b.String()
}
