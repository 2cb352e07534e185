package main

// Discovery for redlock top: which keys on a node are locks. A node's string keys are
// scanned, the library's own keys told apart by their names, and a candidate counts as a
// lock key when it has a TTL and holds a holder id (redlock.IsHolderID); per-key fence
// counters name the lock keys they belong to, for --all.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// topScanCount is the COUNT hint of top's SCANs: how many keys a node examines per call.
// A node of the slot layout holds up to 16 384 slot counters, so a whole scan of one takes
// about 17 calls.
const topScanCount = 1000

// topFound is what one node's scan found: keys that hold a holder id and have a TTL, the
// lock keys named by per-key fence counters, and the names of the read/write locks whose
// readers set is on the node.
type topFound struct {
	holders, counters, readers []string
}

// topPass is one SCAN of a node: a MATCH pattern ("" for all) and a TYPE.
type topPass struct {
	pattern, typ string
}

// scanPasses are the scans of one node: its string keys (all, or with --match the keys it
// matches and the per-key fence counters, whose names are not their keys' and which give
// --all its free locks), then the read/write locks' readers sets (sorted sets named
// ReadersPrefix + ...), for the locks that readers hold. With --match the readers sets are
// all scanned and kept when --match matches either the readers key or the lock's writer key
// (RWLock.Key), the key by which users know the lock.
func (t *topper) scanPasses() []topPass {
	if t.cfg.match == "" {
		return []topPass{{"", "string"}, {redlock.ReadersPrefix + "*", "zset"}}
	}
	return []topPass{{t.cfg.match, "string"}, {redlock.FencePrefix + "*", "string"}, {redlock.ReadersPrefix + "*", "zset"}}
}

// scan returns the lock keys and read/write locks found on one node, at most --limit names
// examined over its passes, each call (a SCAN, then one pipeline of GET and PTTL for the names it returned
// that are not the library's own) bounded by the node timeout. A lock key is a string key,
// not one of the library's own, that has a TTL and holds a holder id; a per-key fence
// counter names its lock key too, so that --all can show free locks of the key layout.
func (t *topper) scan(ctx context.Context, cl redis.UniversalClient) (topFound, topNode) {
	var n topNode
	var f topFound
	fail := func(what string, err error) (topFound, topNode) {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no reply to %s within %v", what, t.nodeTimeout)
		}
		n.err = err
		return f, n
	}
	for _, pass := range t.scanPasses() {
		var cursor uint64
		for {
			if n.examined == t.cfg.limit {
				// names may be left: the budget is spent
				n.truncated, n.cutReaders = true, pass.typ == "zset"
				return f, n
			}
			cctx, cancel := context.WithTimeout(ctx, t.nodeTimeout)
			names, next, err := cl.ScanType(cctx, cursor, pass.pattern, topScanCount, pass.typ).Result()
			cancel()
			if err != nil {
				return fail("SCAN", err)
			}
			if left := t.cfg.limit - n.examined; len(names) > left {
				names, n.truncated, n.cutReaders = names[:left], true, pass.typ == "zset"
			}
			n.examined += len(names)
			var candidates []string
			for _, name := range names {
				if pass.typ == "zset" {
					if rw, ok := redlock.ParseReadersKey(name); ok && (t.matches(name) || t.matches(t.c.RWLock(rw).Key())) {
						f.readers = append(f.readers, rw)
					}
					continue
				}
				if k, ok := redlock.LockKeyOfCounter(name); ok {
					f.counters = append(f.counters, k)
				} else if name != "" && len(name) <= redlock.MaxKeyLen && !libraryKey(name) {
					candidates = append(candidates, name)
				}
			}
			if len(candidates) > 0 {
				found, err := t.holderKeys(ctx, cl, candidates)
				if err != nil {
					return fail("GET and PTTL", err)
				}
				f.holders = append(f.holders, found...)
			}
			if n.truncated {
				return f, n
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return f, n
}

// holderKeys returns those of names that hold a holder id and have a TTL, read in one
// pipeline bounded by the node timeout. A key that vanished or changed type between the
// SCAN and the read is left out.
func (t *topper) holderKeys(ctx context.Context, cl redis.UniversalClient, names []string) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, t.nodeTimeout)
	defer cancel()
	pipe := cl.Pipeline()
	gets := make([]*redis.StringCmd, len(names))
	ttls := make([]*redis.DurationCmd, len(names))
	for i, name := range names {
		gets[i] = pipe.Get(cctx, name)
		ttls[i] = pipe.PTTL(cctx, name)
	}
	_, _ = pipe.Exec(cctx) // each command's error is looked at below
	var keys []string
	for i, name := range names {
		v, gerr := gets[i].Result()
		ttl, terr := ttls[i].Result()
		for _, err := range []error{gerr, terr} {
			if err != nil && !isReply(err) {
				return nil, err
			}
		}
		if gerr == nil && terr == nil && ttl > 0 && redlock.IsHolderID(v) {
			keys = append(keys, name)
		}
	}
	return keys, nil
}

// isReply reports whether err is a reply of the server (redis.Nil for a key that is gone,
// WRONGTYPE for one that changed type), not a failure to reach it.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// libraryKey reports whether name is one of the library's own keys rather than a lock key:
// a fence counter of either layout, a RedisFence token key, or a waiter queue (no lock key
// may start with any of these prefixes).
func libraryKey(name string) bool {
	for _, p := range []string{redlock.FencePrefix, redlock.SlotCounterPrefix, redlock.HighestTokenPrefix, redlock.QueuePrefix, redlock.WaitersPrefix} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// matches reports whether a lock key passes --match.
func (t *topper) matches(key string) bool { return t.cfg.match == "" || redisGlob(t.cfg.match, key) }
