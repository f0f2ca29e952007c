// The AWS SDK for JavaScript v3 (@aws-sdk/client-s3, @aws-sdk/lib-storage,
// @aws-sdk/s3-request-presigner) as a fencegate S3 API client, for the
// tests of package clients. `make awsjs` installs the pinned packages
// (npm ci) beside this file.
//
// Usage: node fencegate_awsjs.mjs OPERATION ARGS...; the endpoint and
// credentials come from FENCEGATE_S3_ENDPOINT, AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY (over HTTPS, NODE_EXTRA_CA_CERTS names the
// server's certificate). The client has the SDK's default settings
// (default checksums included) but for path-style addressing and one
// attempt per request, so that the test reads the first answer. A token
// goes as the object's metadata fence-token where the operation has
// metadata, else as an X-Fence-Token header that a middleware adds before
// signing, so that it is signed. On an S3 error it prints "S3 error CODE
// (HTTP STATUS): MESSAGE", as the SDK parsed it, and exits 1.
import { readFileSync } from "node:fs";
import zlib from "node:zlib";
import {
  S3Client, PutObjectCommand, GetObjectCommand, CopyObjectCommand, DeleteObjectCommand,
  DeleteObjectsCommand, ListObjectsV2Command, CreateMultipartUploadCommand, UploadPartCommand,
  ListMultipartUploadsCommand, AbortMultipartUploadCommand,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";

const s3 = new S3Client({
  region: "us-east-1",
  endpoint: process.env.FENCEGATE_S3_ENDPOINT,
  forcePathStyle: true,
  maxAttempts: 1,
});

// withToken sends command with an X-Fence-Token header, added before the
// request is signed.
async function withToken(command, token) {
  command.middlewareStack.add(
    (next) => (args) => {
      args.request.headers["x-fence-token"] = token;
      return next(args);
    },
    { step: "build", name: "fencegateToken" },
  );
  return s3.send(command);
}

// presigned sends body (or nothing) to url with fetch, as a browser or
// curl would, and returns the answer's bytes; a non-2xx answer is thrown
// as an S3 error with the code of its XML document.
async function presigned(method, url, body) {
  const resp = await fetch(url, { method, body });
  const bytes = Buffer.from(await resp.arrayBuffer());
  if (!resp.ok) {
    const code = /<Code>([^<]*)<\/Code>/.exec(bytes.toString())?.[1] ?? "";
    const err = new Error(bytes.toString());
    err.name = code;
    err.$metadata = { httpStatusCode: resp.status };
    throw err;
  }
  return bytes;
}

async function main(op, ...args) {
  switch (op) {
    case "put": { // put BUCKET KEY FILE TOKEN: one PutObject, the token as metadata
      const [Bucket, Key, file, token] = args;
      await s3.send(new PutObjectCommand({ Bucket, Key, Body: readFileSync(file), Metadata: { "fence-token": token } }));
      break;
    }
    case "put-header": { // put-header BUCKET KEY FILE TOKEN: one PutObject, the token as X-Fence-Token
      const [Bucket, Key, file, token] = args;
      await withToken(new PutObjectCommand({ Bucket, Key, Body: readFileSync(file) }), token);
      break;
    }
    case "upload": { // upload BUCKET KEY FILE TOKEN PART_BYTES: lib-storage Upload, in parts
      const [Bucket, Key, file, token, part] = args;
      const upload = new Upload({
        client: s3,
        params: { Bucket, Key, Body: readFileSync(file), Metadata: { "fence-token": token } },
        partSize: Number(part),
      });
      await upload.done();
      break;
    }
    case "upload-checksum": { // upload-checksum BUCKET KEY FILE TOKEN PART_BYTES ALGORITHM: upload, with ChecksumAlgorithm
      const [Bucket, Key, file, token, part, ChecksumAlgorithm] = args;
      const upload = new Upload({
        client: s3,
        params: { Bucket, Key, Body: readFileSync(file), Metadata: { "fence-token": token }, ChecksumAlgorithm },
        partSize: Number(part),
      });
      await upload.done();
      break;
    }
    case "list": { // list BUCKET PREFIX: one key a line
      const [Bucket, Prefix] = args;
      let ContinuationToken;
      do {
        const page = await s3.send(new ListObjectsV2Command({ Bucket, Prefix, ContinuationToken }));
        for (const obj of page.Contents ?? []) console.log(obj.Key);
        ContinuationToken = page.NextContinuationToken;
      } while (ContinuationToken);
      break;
    }
    case "range": { // range BUCKET KEY FIRST: the bytes from FIRST on, to stdout
      const [Bucket, Key, first] = args;
      const out = await s3.send(new GetObjectCommand({ Bucket, Key, Range: `bytes=${first}-` }));
      process.stdout.write(Buffer.from(await out.Body.transformToByteArray()));
      break;
    }
    case "copy": { // copy BUCKET SOURCE KEY TOKEN: CopyObject, the token as X-Fence-Token
      const [Bucket, source, Key, token] = args;
      await withToken(new CopyObjectCommand({ Bucket, Key, CopySource: `${Bucket}/${source}` }), token);
      break;
    }
    case "delete": { // delete BUCKET KEY TOKEN: DeleteObject, the token as X-Fence-Token
      const [Bucket, Key, token] = args;
      await withToken(new DeleteObjectCommand({ Bucket, Key }), token);
      break;
    }
    case "delete-objects": { // delete-objects BUCKET TOKEN KEY...: DeleteObjects; a key refused exits 1
      const [Bucket, token, ...keys] = args;
      const out = await withToken(new DeleteObjectsCommand({ Bucket, Delete: { Objects: keys.map((Key) => ({ Key })) } }), token);
      for (const d of out.Deleted ?? []) console.log("deleted " + d.Key);
      for (const e of out.Errors ?? []) console.log(`error ${e.Key} ${e.Code}: ${e.Message}`);
      if ((out.Errors ?? []).length > 0) process.exit(1);
      break;
    }
    case "presigned-put": { // presigned-put BUCKET KEY FILE TOKEN default|checksum|tagging: PUT FILE to a presigned URL
      // default: the presigner's defaults (it signs the CRC32 of the empty
      // body it was given); checksum: the file's CRC32 given to it;
      // tagging: that and the tags project=fence, team=a b (which the
      // presigner moves into the query, x-amz-tagging).
      const [Bucket, Key, file, token, mode] = args;
      const body = readFileSync(file);
      const input = { Bucket, Key, Metadata: { "fence-token": token } };
      if (mode === "tagging") {
        input.Tagging = "project=fence&team=a%20b";
      }
      if (mode === "checksum" || mode === "tagging") {
        const sum = Buffer.alloc(4);
        sum.writeUInt32BE(zlib.crc32(body));
        input.ChecksumCRC32 = sum.toString("base64");
      }
      const url = await getSignedUrl(s3, new PutObjectCommand(input), { expiresIn: 600 });
      await presigned("PUT", url, body);
      break;
    }
    case "presigned-copy": { // presigned-copy BUCKET SOURCE KEY TOKEN: CopyObject by a presigned URL, the token as metadata
      // The presigner moves every x-amz-* header but the encryption ones
      // into the query: x-amz-copy-source, x-amz-metadata-directive and
      // x-amz-meta-fence-token go there.
      const [Bucket, source, Key, token] = args;
      const url = await getSignedUrl(s3, new CopyObjectCommand({
        Bucket, Key, CopySource: `${Bucket}/${source}`, MetadataDirective: "REPLACE", Metadata: { "fence-token": token },
      }), { expiresIn: 600 });
      if (!new URL(url).searchParams.has("x-amz-copy-source")) throw new Error("the presigner left x-amz-copy-source out of the query: " + url);
      await presigned("PUT", url);
      break;
    }
    case "presigned-get": { // presigned-get BUCKET KEY: GET a presigned URL, the bytes to stdout
      const [Bucket, Key] = args;
      const url = await getSignedUrl(s3, new GetObjectCommand({ Bucket, Key }), { expiresIn: 600 });
      process.stdout.write(await presigned("GET", url));
      break;
    }
    case "start-upload": { // start-upload BUCKET KEY TOKEN: CreateMultipartUpload and one part, left incomplete
      const [Bucket, Key, token] = args;
      const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket, Key, Metadata: { "fence-token": token } }));
      await s3.send(new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: 1, Body: Buffer.alloc(1024, "p") }));
      console.log(UploadId);
      break;
    }
    case "uploads": { // uploads BUCKET PREFIX: "KEY UPLOAD_ID" a line
      const [Bucket, Prefix] = args;
      const out = await s3.send(new ListMultipartUploadsCommand({ Bucket, Prefix }));
      for (const u of out.Uploads ?? []) console.log(`${u.Key} ${u.UploadId}`);
      break;
    }
    case "abort": { // abort BUCKET KEY UPLOAD_ID: AbortMultipartUpload
      const [Bucket, Key, UploadId] = args;
      await s3.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId }));
      break;
    }
    default:
      throw new Error("unknown operation " + op);
  }
}

try {
  await main(...process.argv.slice(2));
} catch (e) {
  const status = e.$metadata?.httpStatusCode;
  if (status === undefined) throw e;
  console.error(`S3 error ${e.name} (HTTP ${status}): ${e.message}`);
  process.exit(1);
}
