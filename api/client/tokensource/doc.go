// Package tokensource is the home of the adapters that take a fencing
// token from a lock service a team already runs, one package per service
// so that a program pulls in only the client library of the service it
// uses (api/client itself imports only the standard library):
//
//   - [fencegate/api/client/tokensource/mysql]: a MySQL or MariaDB lease
//     table whose fence column is bumped with LAST_INSERT_ID(fence + 1) in
//     the UPDATE that takes the lease (database/sql only; bring a driver).
//   - [fencegate/api/client/tokensource/zookeeper]: ZooKeeper's lock
//     recipe, whose token is the lock znode's czxid
//     (github.com/go-zookeeper/zk).
//
// Redis has no adapter: a SET NX PX lock's value is a random string, which
// cannot say which of two grants is newer, and an INCR counter can repeat
// after a failover. docs/token-sources.md says why for each source.
package tokensource
