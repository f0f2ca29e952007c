"""An aws-cli plugin that sends a fencing token in X-Fence-Token, signed.

aws-cli has no option to add a header to its requests; this plugin adds
X-Fence-Token with the value of the environment variable
FENCEGATE_FENCE_TOKEN to every S3 request before aws-cli signs it, so the
header is among the signed ones, as fencegate requires. Without the
variable it adds nothing. Register it (aws-cli v2) with:

    aws configure set plugins.cli_legacy_plugin_path DIRECTORY_OF_THIS_FILE
    aws configure set plugins.fencegate fencegate_fence_token
"""
import os


def awscli_initialize(cli):
    cli.register("before-sign.s3", add_fence_token)


def add_fence_token(request, **kwargs):
    token = os.environ.get("FENCEGATE_FENCE_TOKEN")
    if token:
        request.headers["X-Fence-Token"] = token
