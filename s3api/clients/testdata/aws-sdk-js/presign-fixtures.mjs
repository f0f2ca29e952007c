// Prints presigned URLs made by the AWS SDK for JavaScript v3 presigner
// (@aws-sdk/s3-request-presigner) with its default settings, for the unit
// tests of package sigv4 (s3api/sigv4/testdata/presigned-aws-sdk-js.txt):
//
//   node presign-fixtures.mjs > ../../../sigv4/testdata/presigned-aws-sdk-js.txt
//
// Fixed credentials, endpoint and signing time, so that the URLs are the
// same each run and the test verifies them at that time.
import zlib from "node:zlib";
import { S3Client, PutObjectCommand, GetObjectCommand } from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";

const s3 = new S3Client({
  region: "us-east-1",
  endpoint: "http://127.0.0.1:9000",
  forcePathStyle: true,
  credentials: { accessKeyId: "AKIDFENCEGATETEST", secretAccessKey: "s3cr3t/FENCEGATE+test/KEY" },
});
const signingDate = new Date("2026-01-02T03:04:05Z");
const body = Buffer.from("the body of a presigned PUT\n");
const crc32 = Buffer.alloc(4);
crc32.writeUInt32BE(zlib.crc32(body));

const sign = (command, options = {}) => getSignedUrl(s3, command, { expiresIn: 3600, signingDate, ...options });
// The presigner keeps the server-side encryption headers as headers
// unless its caller names them hoistable; these URLs carry them in the
// query.
const sse = ["x-amz-server-side-encryption", "x-amz-server-side-encryption-aws-kms-key-id",
  "x-amz-server-side-encryption-context", "x-amz-server-side-encryption-bucket-key-enabled"];
const ssec = ["x-amz-server-side-encryption-customer-algorithm", "x-amz-server-side-encryption-customer-key",
  "x-amz-server-side-encryption-customer-key-md5"];
console.log("# Made by s3api/clients/testdata/aws-sdk-js/presign-fixtures.mjs; signed at " + signingDate.toISOString());
console.log("# name method url; the PUTs are for the body " + JSON.stringify(body.toString()));
console.log("put-default PUT " + await sign(new PutObjectCommand({ Bucket: "bucket", Key: "dir/a b+c.txt" })));
console.log("put-checksum-token PUT " + await sign(new PutObjectCommand({
  Bucket: "bucket", Key: "dir/a b+c.txt", ChecksumCRC32: crc32.toString("base64"), Metadata: { "fence-token": "7" },
})));
console.log("get-default GET " + await sign(new GetObjectCommand({ Bucket: "bucket", Key: "dir/a b+c.txt" })));
console.log("put-tagging PUT " + await sign(new PutObjectCommand({
  Bucket: "bucket", Key: "dir/a b+c.txt", ChecksumCRC32: crc32.toString("base64"), Tagging: "project=fence&team=a%20b",
})));
console.log("put-sse-kms PUT " + await sign(new PutObjectCommand({
  Bucket: "bucket", Key: "dir/a b+c.txt", ChecksumCRC32: crc32.toString("base64"), ServerSideEncryption: "aws:kms",
  SSEKMSKeyId: "arn:aws:kms:us-east-1:111122223333:key/1234abcd",
  SSEKMSEncryptionContext: Buffer.from('{"project":"fencegate"}').toString("base64"), BucketKeyEnabled: true,
}), { hoistableHeaders: new Set(sse) }));
console.log("put-sse-c PUT " + await sign(new PutObjectCommand({
  Bucket: "bucket", Key: "dir/a b+c.txt", ChecksumCRC32: crc32.toString("base64"), SSECustomerAlgorithm: "AES256",
  SSECustomerKey: "0123456789abcdef0123456789abcdef",
}), { hoistableHeaders: new Set(ssec) }));
