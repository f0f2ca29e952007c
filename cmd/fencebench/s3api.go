package main

// The S3 API cell: PutObject with aws-sdk-go-v2 through the gateway's S3
// API (fencegate serve --s3-listen), against the same SDK client writing
// straight to S3 (modeDirectSDK), at the shape of the summary's ratio.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"fencegate/api"
	"fencegate/internal/devstack"
)

// modeS3API is a PutObject with aws-sdk-go-v2, set up as modeDirectSDK's
// client, through the S3 API of a gateway (fencegate serve --s3-listen, a
// child process, auth on with the bench's S3 access key), the token in
// the object's metadata as `aws s3 cp --metadata fence-token=N` sends it.
// The door does the conditional write; the client sends none.
const modeS3API = "s3api"

// The S3 API's only cell: s3api_c64_ratio_vs_direct_sdk is its rate over
// modeDirectSDK's at this shape, and s3api_cpu_ratio_vs_rest its gateway's
// CPU per write over modeGateway's (the REST API's) at this shape.
const (
	s3APIPattern     = patternDistinct
	s3APISize        = 1 << 10
	s3APIConcurrency = 64
)

// The paced cells: modeGateway and modeS3API at the S3 API cell's size
// and concurrency, on distinct objects, each offered s3APIPacedRate
// writes a second (patternPaced), in the same rounds.
// s3api_paced_cpu_ratio_vs_rest is the S3 API gateway's CPU per write
// over the REST API's there. The closed-loop cells compare the doors at
// the rates they reach, and on a machine whose cores the load's clients
// share with the gateways, the S3 cell's client (aws-sdk-go-v2, which
// takes about twice the CPU per write of the REST cell's) leaves its
// gateway fewer writes a second, each of which then costs more (fewer
// writes share each wake-up and each batch of fence checks). At one
// offered rate, below what either reaches on a loaded machine, both
// gateways serve the same load, and the ratio is their own code's.
const (
	patternPaced   = "paced"
	s3APIPacedRate = 500
	// pacedKeptUp is the share of the offered rate a paced cell must
	// serve for the two to count as the same load.
	pacedKeptUp = 0.95
	// pacedWindows is a paced cell's window as a multiple of a cell's:
	// at its rate, a window of a closed-loop cell's length holds a few
	// hundred CPU clock ticks of the gateway's, fewer than the ratio
	// needs to be read to a few per cent.
	pacedWindows = 3
)

// s3APIPacedCells returns the paced cells, when planned holds the S3 API
// cell and cfg.modes has the REST gateway too.
func s3APIPacedCells(cfg config, planned []cell) []cell {
	if !slices.Contains(planned, cell{modeS3API, s3APIPattern, s3APISize, s3APIConcurrency}) || !slices.Contains(cfg.modes, modeGateway) {
		return nil
	}
	return []cell{{modeGateway, patternPaced, s3APISize, s3APIConcurrency}, {modeS3API, patternPaced, s3APISize, s3APIConcurrency}}
}

// rate returns the writes a second offered to cell c, 0 for a closed
// loop.
func (c cell) rate() float64 {
	if c.pattern == patternPaced {
		return s3APIPacedRate
	}
	return 0
}

// s3APIShape reports whether s is the shape the S3 API cell runs at.
func s3APIShape(pattern string, size int64, concurrency int) bool {
	return pattern == s3APIPattern && size == s3APISize && concurrency == s3APIConcurrency
}

// The bench's S3 access key on the S3 API gateway.
const (
	s3APIAccessKey = "fencebench-s3api"
	s3APISecret    = "fencebench-s3api-secret-0123456789abcdef"
)

// s3APIConfig is the S3 API gateway's config file: an identity that may
// do everything, with the bench's S3 access key (its secret in a file
// next to it) and an API key that nobody uses.
const s3APIConfig = `auth:
  identities:
    - name: fencebench
      grants: [{prefix: "", operations: [admin]}]
      s3_keys: [{access_key_id: ` + s3APIAccessKey + `, secret_file: s3api.secret}]
      api_keys: ["sha256:0000000000000000000000000000000000000000000000000000000000000001"]
`

// startS3APIGateway runs the gateway of modeS3API and returns it and the
// URL of its S3 API.
func startS3APIGateway(ctx context.Context, st *stack, bin, logLevel string) (*gatewayProcess, string, error) {
	dir := filepath.Join(st.workDir, "s3api")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "s3api.secret"), []byte(s3APISecret+"\n"), 0o600); err != nil {
		return nil, "", err
	}
	config := filepath.Join(dir, "fencegate.yaml")
	if err := os.WriteFile(config, []byte(s3APIConfig), 0o600); err != nil {
		return nil, "", err
	}
	port, err := devstack.FreePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	g, err := startGateway(ctx, st, modeS3API, bin, st.s3Endpoint, logLevel, "--config", config, "--s3-listen", addr)
	if err != nil {
		return nil, "", err
	}
	return g, "http://" + addr, nil
}

// newS3APIClient is modeS3API's client: newDirectClient's set-up, with
// the S3 API's endpoint and the bench's key.
func newS3APIClient(st *stack, endpoint string, pool int) *s3.Client {
	door := *st
	door.s3Endpoint, door.accessKey, door.secretKey = endpoint, s3APIAccessKey, s3APISecret
	client, _ := newDirectClient(&door, pool)
	return client
}

// s3APIPut is modeS3API: each write carries benchToken, so a refusal
// (stale, or a lost race on a hot object) is a conflict.
func s3APIPut(client *s3.Client, bucket string, size int64) operation {
	token := map[string]string{api.MetadataFenceToken: benchToken.String()}
	return func(ctx context.Context, w *worker) (outcome, error) {
		_, err := client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        aws.String(bucket),
			Key:           aws.String(w.key),
			Body:          w.nextBody(),
			ContentLength: aws.Int64(size),
			Metadata:      token,
		})
		switch {
		case err == nil:
			return outcomeOK, nil
		case lostRace(err):
			return outcomeConflict, nil
		}
		return outcomeError, fmt.Errorf("s3api put: %w", err)
	}
}
