"""boto3 as a fencegate S3 API client, for the tests of package clients.

Usage: fencegate_boto3.py OPERATION ARGS...; the endpoint and credentials
come from FENCEGATE_S3_ENDPOINT, AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY. On an S3 error it prints the error code and message
and exits 1, as a script of a user's would.
"""
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
    elif op == "list":  # list BUCKET PREFIX: one key a line
        bucket, prefix = args
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                print(obj["Key"])
    elif op == "range":  # range BUCKET KEY FIRST LAST: the bytes to stdout
        bucket, key, first, last = args
        body = s3.get_object(Bucket=bucket, Key=key, Range="bytes=%s-%s" % (first, last))["Body"].read()
        sys.stdout.buffer.write(body)
    else:
        sys.exit("unknown operation " + op)


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
