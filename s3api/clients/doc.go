// Package clients holds no code: its tests run the real, unmodified S3
// clients as child processes against the S3 front door (package s3api)
// over real etcd and a real versitygw: the command-line clients from
// Debian's packages (aws-cli, rclone, s3cmd, and boto3 in a python3
// script) and the AWS SDK for JavaScript v3 in a node script
// (testdata/aws-sdk-js, its npm packages pinned by package-lock.json), and
// read what they wrote back with an independent client (minio-go,
// straight from versitygw). `make awscli rclone s3cmd boto3 awsjs`
// installs the clients; a test whose client is missing fails naming the
// target.
package clients
