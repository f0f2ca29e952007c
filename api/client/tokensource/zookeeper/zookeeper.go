// Package zookeeper is ZooKeeper's lock recipe with a fencing token: each
// contender creates an ephemeral sequential znode under the lock's path,
// the one with the lowest sequence number holds the lock, and each other
// contender watches the znode just before its own (not the whole
// directory, so that a release wakes one waiter). The token is the czxid
// of the holder's znode: the zxid of the transaction that created it.
//
// Why czxid: zxids are one counter for the whole ensemble, assigned by the
// leader in commit order, and a new leader starts a new epoch (the high 32
// bits) above every earlier one, so a znode created after another always
// has a larger czxid, across lock paths and across leader failover. The
// sequence number is not a token: it is a per-parent counter (the parent's
// cversion), so two lock paths count independently, and it starts again
// at 0 when the parent znode is deleted and created again (Curator's lock
// parents are container znodes, which the server deletes once empty).
//
// A holder whose session expires (its process paused, its connection
// partitioned away) loses its ephemeral znode, and the next contender
// takes the lock with a larger czxid; the old holder still has its token,
// and fencegate refuses it once the new holder wrote.
package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"

	"fencegate/api"
)

// ErrNotLocked is returned by Unlock when the Lock does not hold the lock.
var ErrNotLocked = errors.New("zookeeper lock: not locked")

// Lock is one contender for the lock at a path. It is not safe for
// concurrent use; make one Lock per contender.
type Lock struct {
	conn *zk.Conn
	path string
	acl  []zk.ACL
	node string // our znode's path while held
}

// NewLock returns a contender for the lock whose znodes live under path
// (made with acl, and its missing parents too, on first use). A nil acl is
// zk.WorldACL(zk.PermAll).
func NewLock(conn *zk.Conn, path string, acl []zk.ACL) *Lock {
	if acl == nil {
		acl = zk.WorldACL(zk.PermAll)
	}
	return &Lock{conn: conn, path: strings.TrimSuffix(path, "/"), acl: acl}
}

// Lock waits until this contender holds the lock and returns the fencing
// token of the grant, the czxid of its znode. When ctx ends first, or the
// session expires while waiting, it deletes its znode (if it still can)
// and returns the error.
func (l *Lock) Lock(ctx context.Context) (api.Token, error) {
	if l.node != "" {
		return 0, zk.ErrDeadlock
	}
	node, err := l.create()
	if err != nil {
		return 0, err
	}
	token, err := l.wait(ctx, node)
	if err != nil {
		_ = l.conn.Delete(node, -1) // best effort: an expired session has lost it anyway
		return 0, err
	}
	l.node = node
	return token, nil
}

// create makes our ephemeral sequential znode, making the lock's path
// first if it is missing.
func (l *Lock) create() (string, error) {
	prefix := l.path + "/lock-"
	node, err := l.conn.CreateProtectedEphemeralSequential(prefix, nil, l.acl)
	if errors.Is(err, zk.ErrNoNode) {
		if err := l.makePath(); err != nil {
			return "", err
		}
		node, err = l.conn.CreateProtectedEphemeralSequential(prefix, nil, l.acl)
	}
	if err != nil {
		return "", fmt.Errorf("zookeeper lock: create under %s: %w", l.path, err)
	}
	return node, nil
}

// makePath creates the lock's path and its missing parents.
func (l *Lock) makePath() error {
	path := ""
	for part := range strings.SplitSeq(strings.TrimPrefix(l.path, "/"), "/") {
		path += "/" + part
		if _, err := l.conn.Create(path, nil, 0, l.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zookeeper lock: create %s: %w", path, err)
		}
	}
	return nil
}

// wait returns once node has the lowest sequence number under the lock's
// path, with node's czxid, watching the znode just before node meanwhile.
func (l *Lock) wait(ctx context.Context, node string) (api.Token, error) {
	seq, err := sequence(node)
	if err != nil {
		return 0, err
	}
	for {
		children, _, err := l.conn.Children(l.path)
		if err != nil {
			return 0, fmt.Errorf("zookeeper lock: list %s: %w", l.path, err)
		}
		predecessor, predecessorSeq, found := "", -1, false
		for _, child := range children {
			s, err := sequence(child)
			if err != nil {
				continue // not a lock znode
			}
			if s == seq {
				found = true
			}
			if s < seq && s > predecessorSeq {
				predecessor, predecessorSeq = child, s
			}
		}
		if !found {
			return 0, fmt.Errorf("zookeeper lock: %s is gone (session expired): %w", node, zk.ErrNoNode)
		}
		if predecessor == "" {
			return czxid(l.conn, node)
		}
		exists, _, events, err := l.conn.ExistsW(l.path + "/" + predecessor)
		if err != nil {
			return 0, fmt.Errorf("zookeeper lock: watch %s: %w", predecessor, err)
		}
		if !exists {
			continue
		}
		select {
		case ev := <-events:
			if ev.Err != nil {
				return 0, fmt.Errorf("zookeeper lock: watching %s: %w", predecessor, ev.Err)
			}
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}
}

// czxid returns node's creation zxid as a token.
func czxid(conn *zk.Conn, node string) (api.Token, error) {
	exists, stat, err := conn.Exists(node)
	if err != nil {
		return 0, fmt.Errorf("zookeeper lock: stat %s: %w", node, err)
	}
	if !exists {
		return 0, fmt.Errorf("zookeeper lock: %s is gone (session expired): %w", node, zk.ErrNoNode)
	}
	if stat.Czxid < 1 {
		return 0, fmt.Errorf("zookeeper lock: %s has czxid %d, not a token", node, stat.Czxid)
	}
	return api.Token(stat.Czxid), nil
}

// sequence reads the sequence number ZooKeeper appended to a lock znode's
// name (ten digits after "lock-").
func sequence(node string) (int, error) {
	i := strings.LastIndex(node, "lock-")
	if i < 0 {
		return 0, fmt.Errorf("zookeeper lock: %q is not a lock znode", node)
	}
	return strconv.Atoi(node[i+len("lock-"):])
}

// Unlock releases the lock by deleting this contender's znode. It returns
// ErrNotLocked when the Lock does not hold it; a znode already gone (the
// session expired) is not an error here: the lock was lost before.
func (l *Lock) Unlock() error {
	if l.node == "" {
		return ErrNotLocked
	}
	err := l.conn.Delete(l.node, -1)
	l.node = ""
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("zookeeper lock: delete: %w", err)
	}
	return nil
}
