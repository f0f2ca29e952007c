// Package clients holds no code: its tests run the real, unmodified S3
// command-line clients from Debian's packages (aws-cli, rclone, s3cmd,
// and boto3 in a python3 script) as child processes against the S3 front
// door (package s3api) over real etcd and a real versitygw, and read what
// they wrote back with an independent client (minio-go, straight from
// versitygw). `make awscli rclone s3cmd boto3` installs the clients.
package clients
