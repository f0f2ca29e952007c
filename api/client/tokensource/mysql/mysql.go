// Package mysql takes fencing tokens from a MySQL or MariaDB lease table:
// one row per lock, whose fence column grows by one with every grant. The
// grant and its token are one statement,
//
//	UPDATE leases SET fence = LAST_INSERT_ID(fence + 1), holder = ?, expires_at = ...
//	 WHERE name = ? AND (holder IS NULL OR expires_at < NOW(6))
//
// so no grant can be given without its fence being bumped, and the row
// lock InnoDB takes for the UPDATE orders two grants of one lock. The new
// fence comes back in the statement's own answer (the "last insert id" of
// the OK packet, which LAST_INSERT_ID(expr) sets), read with
// sql.Result.LastInsertId: a separate SELECT LAST_INSERT_ID() on a pooled
// *sql.DB may run on another connection, and after an UPDATE that matched
// no row it returns the connection's previous value, an old token.
//
// The package uses database/sql only: the program imports the driver it
// likes (github.com/go-sql-driver/mysql is what the tests use). The fence
// is monotonic as long as the database does not lose a committed grant: one
// primary, or a failover that only promotes a replica holding every
// committed transaction (semi-synchronous replication, Galera). A failover
// to an asynchronous replica can reissue a fence.
package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"fencegate/api"
)

// Schema creates the lease table Acquire and Release use, if it is not
// there. A row is created the first time a lock name is acquired.
const Schema = `CREATE TABLE IF NOT EXISTS leases (
  name       VARCHAR(191) NOT NULL PRIMARY KEY,
  holder     VARCHAR(191) NULL,
  expires_at DATETIME(6)  NULL,
  fence      BIGINT UNSIGNED NOT NULL DEFAULT 0
) ENGINE=InnoDB`

// acquireSQL takes the lease if it is free or expired, and bumps the fence
// in the same statement; the expiry is computed on the database's clock,
// the clock the WHERE clause compares with.
const acquireSQL = `UPDATE leases
   SET fence = LAST_INSERT_ID(fence + 1), holder = ?, expires_at = NOW(6) + INTERVAL ? MICROSECOND
 WHERE name = ? AND (holder IS NULL OR expires_at < NOW(6))`

// createSQL makes a lock's row, with fence 0, if it is not there: one row
// affected when it made it, none when the row was there. (Not INSERT
// IGNORE, which would turn a name too long for the column into a warning
// and a truncated row.)
const createSQL = `INSERT INTO leases (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name`

// releaseSQL frees the lease if it is still the grant with this fence.
const releaseSQL = `UPDATE leases SET holder = NULL, expires_at = NULL WHERE name = ? AND fence = ?`

// ErrHeld is returned by Acquire when another holder has an unexpired
// lease.
var ErrHeld = errors.New("mysql lease: held by another holder")

// ErrNotHeld is returned by Release when the lease is no longer the grant
// with that token: it expired and was granted again.
var ErrNotHeld = errors.New("mysql lease: not held with this token")

// Execer runs a statement: *sql.DB, *sql.Conn and *sql.Tx are Execers.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Acquire takes the lease on lock for holder for ttl (rounded down to a
// microsecond) if it is free or expired, creating the lock's row the
// first time, and returns the grant's fencing token: the new fence, which
// is larger than that of every earlier grant of lock. It returns ErrHeld
// when another holder's lease has not expired. A lease ends when it
// expires: Acquire does not renew it, and the holder must stop using the
// token by then; writes made later through fencegate are refused once a
// newer grant wrote.
func Acquire(ctx context.Context, db Execer, lock, holder string, ttl time.Duration) (api.Token, error) {
	if ttl < time.Microsecond {
		return 0, fmt.Errorf("mysql lease: ttl %v below 1µs", ttl)
	}
	for created := false; ; created = true {
		res, err := db.ExecContext(ctx, acquireSQL, holder, ttl.Microseconds(), lock)
		if err != nil {
			return 0, fmt.Errorf("mysql lease: acquire %q: %w", lock, err)
		}
		granted, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("mysql lease: acquire %q: %w", lock, err)
		}
		if granted == 1 {
			return token(res)
		}
		if created {
			return 0, ErrHeld
		}
		// No row matched: the lease is held, or the lock has no row yet.
		res, err = db.ExecContext(ctx, createSQL, lock)
		if err != nil {
			return 0, fmt.Errorf("mysql lease: create %q: %w", lock, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return 0, ErrHeld // the row was there: someone holds it
		}
	}
}

// token reads the fence that LAST_INSERT_ID(fence + 1) put in the
// statement's answer.
func token(res sql.Result) (api.Token, error) {
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("mysql lease: reading the fence: %w", err)
	}
	if id < 1 {
		return 0, fmt.Errorf("mysql lease: the server answered fence %d, not a token (is there a proxy between that drops the last insert id?)", id)
	}
	return api.Token(id), nil
}

// Release frees the lease on lock taken with token, so that the next
// Acquire need not wait for its expiry. It returns ErrNotHeld when the
// lease expired and was granted again since.
func Release(ctx context.Context, db Execer, lock string, token api.Token) error {
	res, err := db.ExecContext(ctx, releaseSQL, lock, uint64(token))
	if err != nil {
		return fmt.Errorf("mysql lease: release %q: %w", lock, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("mysql lease: release %q: %w", lock, err)
	} else if n == 0 {
		return ErrNotHeld
	}
	return nil
}
