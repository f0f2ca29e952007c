"""boto3 as a fencegate S3 API client, for the tests of package clients.

Usage: fencegate_boto3.py OPERATION ARGS...; the endpoint and credentials
come from FENCEGATE_S3_ENDPOINT, AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY. The tagging operations send the fencing token of
FENCEGATE_FENCE_TOKEN in X-Fence-Token, signed. On an S3 error it prints
the error code and message and exits 1, as a script of a user's would.
"""
import json
import sys
import os

import boto3
import boto3.exceptions
import botocore.config
import botocore.exceptions
from boto3.s3.transfer import TransferConfig


def client():
    return boto3.client(
        "s3",
        endpoint_url=os.environ["FENCEGATE_S3_ENDPOINT"],
        region_name="us-east-1",
        config=botocore.config.Config(
            signature_version="s3v4",
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1, "mode": "standard"},
        ),
    )


def main(op, *args):
    s3 = client()
    if op == "put":  # put BUCKET KEY FILE TOKEN: one PutObject
        bucket, key, path, token = args
        with open(path, "rb") as f:
            s3.put_object(Bucket=bucket, Key=key, Body=f, Metadata={"fence-token": token})
    elif op == "upload":  # upload BUCKET KEY FILE TOKEN PART_BYTES: split into parts
        bucket, key, path, token, part = args
        config = TransferConfig(multipart_threshold=int(part), multipart_chunksize=int(part), max_concurrency=4)
        s3.upload_file(path, bucket, key, ExtraArgs={"Metadata": {"fence-token": token}}, Config=config)
    elif op == "upload-checksum":  # upload-checksum BUCKET KEY FILE TOKEN PART_BYTES ALGORITHM: upload, with ChecksumAlgorithm
        bucket, key, path, token, part, algorithm = args
        config = TransferConfig(multipart_threshold=int(part), multipart_chunksize=int(part), max_concurrency=4)
        s3.upload_file(path, bucket, key, ExtraArgs={"Metadata": {"fence-token": token}, "ChecksumAlgorithm": algorithm}, Config=config)
    elif op == "list":  # list BUCKET PREFIX: one key a line
        bucket, prefix = args
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                print(obj["Key"])
    elif op == "range":  # range BUCKET KEY FIRST LAST: the bytes to stdout
        bucket, key, first, last = args
        body = s3.get_object(Bucket=bucket, Key=key, Range="bytes=%s-%s" % (first, last))["Body"].read()
        sys.stdout.buffer.write(body)
    elif op == "put-tagged":  # put-tagged BUCKET KEY FILE TAGGING: PutObject with its tags (x-amz-tagging)
        bucket, key, path, tagging = args
        with_fence_token(s3)
        with open(path, "rb") as f:
            s3.put_object(Bucket=bucket, Key=key, Body=f, Tagging=tagging)
    elif op == "put-tagging":  # put-tagging BUCKET KEY KEY=VALUE...: PutObjectTagging
        bucket, key, *tags = args
        with_fence_token(s3)
        tag_set = [{"Key": k, "Value": v} for k, v in (t.split("=", 1) for t in tags)]
        s3.put_object_tagging(Bucket=bucket, Key=key, Tagging={"TagSet": tag_set})
    elif op == "get-tagging":  # get-tagging BUCKET KEY: GetObjectTagging, the tags as JSON
        bucket, key = args
        tag_set = s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]
        print(json.dumps({t["Key"]: t["Value"] for t in tag_set}, sort_keys=True))
    elif op == "delete-tagging":  # delete-tagging BUCKET KEY: DeleteObjectTagging
        bucket, key = args
        with_fence_token(s3)
        s3.delete_object_tagging(Bucket=bucket, Key=key)
    elif op == "metadata":  # metadata BUCKET KEY SPELLING TOKEN: what the reads answer, as JSON
        bucket, key, spelling, token = args
        print(json.dumps(metadata_round_trip(s3, bucket, key, spelling, token), sort_keys=True))
    else:
        sys.exit("unknown operation " + op)


def with_fence_token(s3):
    """Has s3 send FENCEGATE_FENCE_TOKEN in X-Fence-Token, added before
    each request is signed, so that it is among the signed headers."""
    token = os.environ["FENCEGATE_FENCE_TOKEN"]

    def add_token(request, **kwargs):
        request.headers["X-Fence-Token"] = token
    s3.meta.events.register("before-sign.s3", add_token)


def metadata_round_trip(s3, bucket, key, spelling, token):
    """Writes key (PutObject), a copy of it (CopyObject, REPLACE), an
    upload in parts, and key again with other metadata, each with its own
    metadata and the token sent as SPELLING: "metadata"
    (x-amz-meta-fence-token) or "header" (X-Fence-Token, signed). Returns
    what a HeadObject and a GetObject of each answer: their Metadata and
    X-Fence-Token."""
    def meta(m):
        return dict(m, **{"fence-token": token}) if spelling == "metadata" else m

    if spelling == "header":
        def add_token(request, **kwargs):
            request.headers["X-Fence-Token"] = token
        s3.meta.events.register("before-sign.s3", add_token)

    def read(k):
        head = s3.head_object(Bucket=bucket, Key=k)
        get = s3.get_object(Bucket=bucket, Key=k)
        get["Body"].read()
        return {
            "head": head["Metadata"],
            "get": get["Metadata"],
            "head-x-fence-token": head["ResponseMetadata"]["HTTPHeaders"].get("x-fence-token", ""),
        }

    out = {}
    s3.put_object(Bucket=bucket, Key=key, Body=b"put", Metadata=meta({"meta1": "v1"}))
    out["put"] = read(key)
    s3.copy_object(Bucket=bucket, Key=key + ".copy", CopySource={"Bucket": bucket, "Key": key},
                   MetadataDirective="REPLACE", Metadata=meta({"meta2": "v2"}))
    out["copy"] = read(key + ".copy")
    up = s3.create_multipart_upload(Bucket=bucket, Key=key + ".parts", Metadata=meta({"meta3": "v3"}))
    part = s3.upload_part(Bucket=bucket, Key=key + ".parts", UploadId=up["UploadId"], PartNumber=1, Body=b"parts")
    s3.complete_multipart_upload(Bucket=bucket, Key=key + ".parts", UploadId=up["UploadId"],
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    out["parts"] = read(key + ".parts")
    s3.put_object(Bucket=bucket, Key=key, Body=b"again", Metadata=meta({"meta4": "v4"}))
    out["replaced"] = read(key)
    return out


if __name__ == "__main__":
    try:
        main(*sys.argv[1:])
    except botocore.exceptions.ClientError as e:
        err = e.response.get("Error", {})
        print("S3 error %s: %s" % (err.get("Code"), err.get("Message")), file=sys.stderr)
        sys.exit(1)
    except boto3.exceptions.S3UploadFailedError as e:  # upload_file wraps the ClientError
        print("upload failed: %s" % e, file=sys.stderr)
        sys.exit(1)
