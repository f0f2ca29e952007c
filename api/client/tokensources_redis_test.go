package client_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	goredis "github.com/redis/go-redis/v9"

	"fencegate/api"
	"fencegate/api/client"
	mysqllease "fencegate/api/client/tokensource/mysql"
	"fencegate/internal/redis"
)

// redisLockTTL is the PX of the tests' Redis locks and the TTL of the
// leases they are compared with: the time after which a stalled holder
// has lost its lock without knowing it.
const redisLockTTL = 3 * time.Second

// startRedis starts a Redis server for the test and returns a client of
// it.
func startRedis(tb testing.TB) *goredis.Client {
	tb.Helper()
	server := redis.Start(tb)
	rdb := goredis.NewClient(&goredis.Options{Addr: server.Addr})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// redisLock is the usual Redis lock: SET key <random value> NX PX ttl. It
// returns the value, the lock's only proof of ownership, or "" when
// someone else holds the key.
func redisLock(tb testing.TB, rdb *goredis.Client, key string) string {
	tb.Helper()
	var b [16]byte
	_, _ = rand.Read(b[:])
	value := hex.EncodeToString(b[:])
	ok, err := rdb.SetNX(context.Background(), key, value, redisLockTTL).Result()
	if err != nil {
		tb.Fatalf("SET %s NX PX: %v", key, err)
	}
	if !ok {
		return ""
	}
	return value
}

// redisLockAfterExpiry takes the Redis lock once the current holder's key
// has expired.
func redisLockAfterExpiry(tb testing.TB, rdb *goredis.Client, key string) string {
	tb.Helper()
	for {
		if value := redisLock(tb, rdb, key); value != "" {
			return value
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisLockValueIsNotAToken: a real Redis lock's value, sent as the
// fencing token, is refused 400 malformed-token: it is a random string,
// which cannot say which of two grants is newer. Nothing reaches S3.
func TestRedisLockValueIsNotAToken(t *testing.T) {
	rdb := startRedis(t)
	e := newEnv(t, nil)
	value := redisLock(t, rdb, "lock:report")
	if value == "" {
		t.Fatal("SET NX on a fresh Redis refused")
	}
	req, err := http.NewRequest(http.MethodPut, e.url+"/v1/objects/"+e.bucket+"/report.csv", strings.NewReader("report"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.HeaderFenceToken, value)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var problem struct {
		Type string `json:"type"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&problem); err != nil {
		t.Fatalf("decoding the answer: %v", err)
	}
	if resp.StatusCode != http.StatusBadRequest || problem.Type != "urn:fencegate:problem:malformed-token" {
		t.Fatalf("PUT with the Redis lock's value %q as token = %d %s; want 400 urn:fencegate:problem:malformed-token", value, resp.StatusCode, problem.Type)
	}
	if _, _, ok := e.stored(t, "report.csv"); ok {
		t.Fatal("S3 holds report.csv after a refused write")
	}
}

// TestRedisLockSeedScenario is the seed's failure and its fix. Worker 1
// takes the lock and stalls past its TTL; worker 2 takes the lock and
// writes; worker 1 wakes up and writes.
//
//   - With a Redis SET NX PX lock and writes straight to S3, worker 1's
//     late write lands: S3 ends with worker 1's stale bytes.
//   - With a lease whose grant is a fencing token (the MySQL lease table,
//     the same TTL) and writes through the gateway, worker 1's late write
//     is refused 409 and S3 keeps worker 2's bytes.
func TestRedisLockSeedScenario(t *testing.T) {
	ctx := context.Background()
	t.Run("redis lock, straight to S3: the stalled worker overwrites", func(t *testing.T) {
		rdb := startRedis(t)
		e := newEnv(t, nil)
		put := func(body string) {
			t.Helper()
			if _, err := e.minio.PutObject(ctx, e.bucket, "report.csv", strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
				t.Fatalf("PUT %q straight to S3: %v", body, err)
			}
		}
		if redisLock(t, rdb, "lock:report") == "" {
			t.Fatal("worker 1's SET NX refused on a fresh Redis")
		}
		if redisLock(t, rdb, "lock:report") != "" {
			t.Fatal("worker 2's SET NX granted while worker 1 holds the key")
		}
		// Worker 1 stalls past the key's PX; worker 2 gets the lock.
		redisLockAfterExpiry(t, rdb, "lock:report")
		put("worker 2's report")
		put("worker 1's report") // worker 1 wakes up, still believing it holds the lock
		if body, _, _ := e.stored(t, "report.csv"); body != "worker 1's report" {
			t.Fatalf("S3 holds %q; the seed's failure is worker 1's stale report overwriting worker 2's", body)
		}
	})
	t.Run("lease with a fence, through the gateway: the stalled worker is refused", func(t *testing.T) {
		db := openMariaDB(t, "")
		e := newEnv(t, nil)
		c := &client.Client{BaseURL: e.url}
		token1, err := mysqllease.Acquire(ctx, db, "report", "worker-1", redisLockTTL)
		if err != nil {
			t.Fatalf("worker 1's grant: %v", err)
		}
		if _, err := mysqllease.Acquire(ctx, db, "report", "worker-2", redisLockTTL); !errors.Is(err, mysqllease.ErrHeld) {
			t.Fatalf("worker 2's grant while worker 1 holds the lease = %v; want ErrHeld", err)
		}
		token2 := acquireAfterExpiry(t, db, "report", "worker-2", redisLockTTL)
		if _, err := c.PutObject(ctx, e.bucket, "report.csv", token2, strings.NewReader("worker 2's report")); err != nil {
			t.Fatalf("worker 2's write: %v", err)
		}
		_, err = c.PutObject(ctx, e.bucket, "report.csv", token1, strings.NewReader("worker 1's report"))
		if !errors.Is(err, api.ErrStaleToken) {
			t.Fatalf("worker 1's late write with token %d = %v; want 409 stale (worker 2 wrote with %d)", token1, err, token2)
		}
		if body, token, _ := e.stored(t, "report.csv"); body != "worker 2's report" || token != token2.String() {
			t.Fatalf("S3 holds %q with token %q; want worker 2's report with %d", body, token, token2)
		}
	})
}
