package main

import (
	"fmt"
	"strings"

	"fencegate/api"
	"fencegate/tokenstore"
)

// tokenChecks is the flag.Value of --token-checks: the token checks per
// bucket, as a comma-separated list of BUCKET=none, BUCKET=plausible or
// BUCKET=held:LOCK; the bucket "*" stands for every resource that no other
// entry names. Setting it replaces the whole list.
type tokenChecks []tokenstore.Policy

// Set parses s.
func (t *tokenChecks) Set(s string) error {
	var out tokenChecks
	seen := make(map[string]bool)
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		bucket, spec, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("%q: want BUCKET=none, BUCKET=plausible or BUCKET=held:LOCK", item)
		}
		bucket = strings.TrimSpace(bucket)
		checkName, lock, _ := strings.Cut(strings.TrimSpace(spec), ":")
		check, err := tokenstore.ParseCheck(checkName)
		if err != nil {
			return fmt.Errorf("%q: %v", item, err)
		}
		p := tokenstore.Policy{Check: check, Lock: lock}
		switch {
		case check == tokenstore.CheckHeld && lock == "":
			return fmt.Errorf("%q: held needs a lock name, as in %s=held:LOCK", item, bucket)
		case check == tokenstore.CheckHeld:
			if err := api.ValidateLockName(lock); err != nil {
				return fmt.Errorf("%q: %v", item, err)
			}
		case lock != "":
			return fmt.Errorf("%q: a lock name goes only with held", item)
		}
		if bucket != "*" {
			if _, err := api.ParseObjectPath(bucket, "k"); err != nil {
				return fmt.Errorf("%q: %v", item, err)
			}
			p.Prefix = api.ObjectResource(bucket, "")
		}
		if seen[bucket] {
			return fmt.Errorf("bucket %q listed twice", bucket)
		}
		seen[bucket] = true
		out = append(out, p)
	}
	*t = out
	return nil
}

// String formats the list as Set parses it.
func (t *tokenChecks) String() string {
	if t == nil {
		return ""
	}
	items := make([]string, 0, len(*t))
	for _, p := range *t {
		bucket := "*"
		if p.Prefix != "" {
			bucket = strings.TrimSuffix(strings.TrimPrefix(string(p.Prefix), "s3/"), "/")
		}
		item := bucket + "=" + string(p.Check)
		if p.Lock != "" {
			item += ":" + p.Lock
		}
		items = append(items, item)
	}
	return strings.Join(items, ",")
}

// tokenChecksUsage is the help of --token-checks.
const tokenChecksUsage = "token `checks` per bucket, beyond token >= high-water mark: comma-separated\n" +
	"BUCKET=none, BUCKET=plausible (refuse tokens above etcd's current revision) or\n" +
	"BUCKET=held:LOCK (only the current holder of fencegate lock LOCK may write);\n" +
	"BUCKET * stands for every other resource (empty: none everywhere)"
