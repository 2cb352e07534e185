package redlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// HighestTokenPrefix starts the name of the key in which a [RedisFence] keeps the highest
// fencing token it has admitted for a data key: HighestTokenPrefix + key when key has a Redis
// Cluster hash tag (a non-empty {…}), else HighestTokenPrefix + "{" + key + "}". Either way the
// token key is in the data key's cluster hash slot, so one script can touch both. Data keys may
// not start with HighestTokenPrefix, [FencePrefix] or [SlotCounterPrefix], and lock keys may not
// start with HighestTokenPrefix. A token key that holds anything but a token (written by
// another program) makes every fenced write of its data key fail with an error that says so.
const HighestTokenPrefix = "redlock:highest:"

// maxHSetFields bounds the field-value pairs of one [RedisFence.HSet]: the script passes them to
// HSET with Lua's unpack, whose stack is limited to a few thousand values.
const maxHSetFields = 1000

// The scripts of RedisFence, built once like those of scripts.go.
var (
	//go:embed lua/fence_tokens.lua
	fenceTokensSrc string
	//go:embed lua/fence_write.lua
	fenceWriteSrc string
	//go:embed lua/fence_incr_all.lua
	fenceIncrAllSrc string
	//go:embed lua/fence_get.lua
	fenceGetSrc string

	fenceWriteScript   = newLua("fence_write", fenceTokensSrc+fenceWriteSrc)
	fenceIncrAllScript = newLua("fence_incr_all", fenceTokensSrc+fenceIncrAllSrc)
	fenceGetScript     = newLua("fence_get", fenceGetSrc)
)

// RedisFence makes fenced writes to a Redis server that is the downstream store of work done
// under a lock: the Redis that holds your data, not one of the lock's nodes. Every write carries
// the writer's fencing token ([Lock.Token]). One Lua script admits the write only if its token
// is at least the highest token admitted before for that key (≥, so that one holder may write
// many times under one token), then writes the data and records the token; otherwise it writes
// nothing and the call returns a [*StaleTokenError]. The check and the write are atomic, so a
// holder whose lock expired while it was paused can never overwrite the work of a later holder.
//
// Layout: the data key holds the data as a plain Redis string, hash or integer, readable with
// the usual commands (GET, HGET, …). Beside it, the token key (see [HighestTokenPrefix]) holds
// the highest admitted token in decimal. Tokens are per data key: all writes to one key, through
// any of Set, HSet and IncrBy, share one token. Deleting the token key forgets the fence and lets
// a stale holder write again; delete the data key alone, or both only when no holder of an old
// token can still be running. Neither key is given a TTL.
//
// Like every store, the fence protects a key only if every writer goes through it: a plain SET
// to the data key is not checked. A RedisFence is safe for concurrent use and holds no
// resources of its own; the go-redis client stays owned by the caller.
type RedisFence struct {
	client redis.UniversalClient
}

// NewRedisFence returns a RedisFence that writes through client, a go-redis client of the
// store (a *redis.Client, a *redis.ClusterClient or a failover client). It sends nothing. A nil
// client is not rejected here, since NewRedisFence has no error result: every method of the
// returned fence then returns an error matching ErrInvalidArgument and sends nothing.
func NewRedisFence(client redis.UniversalClient) *RedisFence {
	return &RedisFence{client: client}
}

// Set stores value under key, as SET does, if tok is at least the highest token admitted for
// key, and then records tok as the highest. It sends one script and returns:
//   - nil when the write was admitted;
//   - a *StaleTokenError (errors.Is(err, ErrStaleToken)) with Highest set when a higher token
//     was admitted before: nothing was written, and the caller must stop working under its lock;
//   - an error matching ErrInvalidArgument, with nothing sent, for a nil client, an empty key, a
//     key that starts with one of the library's prefixes ([HighestTokenPrefix], [FencePrefix],
//     [SlotCounterPrefix], [QueuePrefix], [WaitersPrefix]), a key longer than [MaxKeyLen], or a
//     zero token;
//   - a go-redis or network error (wrapping ctx.Err() when ctx ended): the write may or may not
//     have been applied. Repeating Set with the same token and value is harmless; read the key
//     with [RedisFence.Get] to learn what is stored.
//
// ctx bounds the call as it bounds any go-redis command (reads honour it only with the client's
// ContextTimeoutEnabled). Set is safe for concurrent use.
func (f *RedisFence) Set(ctx context.Context, key, value string, tok Token) error {
	_, err := f.write(ctx, "set", key, tok, value)
	return err
}

// HSet sets the given fields of the hash stored under key, as HSET does, if tok is at least the
// highest token admitted for key, and then records tok as the highest. Fields not named are
// left as they are. One token covers the whole hash: it is the key, not the field, that is
// fenced. fields must hold between 1 and 1000 entries. Results, errors (ErrStaleToken,
// ErrInvalidArgument also for a bad fields map, go-redis errors, WRONGTYPE when key holds
// another type, with nothing written), context behaviour and concurrency are those of
// [RedisFence.Set]; repeating HSet with the same token and fields is harmless too.
func (f *RedisFence) HSet(ctx context.Context, key string, fields map[string]string, tok Token) error {
	if len(fields) == 0 || len(fields) > maxHSetFields {
		return invalidf("hset %q with %d fields; want 1 to %d", key, len(fields), maxHSetFields)
	}
	args := make([]any, 0, 2*len(fields))
	for k, v := range fields {
		args = append(args, k, v)
	}
	_, err := f.write(ctx, "hset", key, tok, args...)
	return err
}

// IncrBy adds delta (which may be negative or zero) to the integer stored under key, as INCRBY
// does (a missing key counts as 0), if tok is at least the highest token admitted for key, and
// then records tok as the highest. It returns the new value, exact over the whole int64 range
// (the script returns it in decimal: Lua's numbers are doubles). A zero delta is a fenced no-op
// that only raises the key's token: later writes with lower tokens are then refused.
//
// Errors are those of [RedisFence.Set], plus a Redis error, with nothing written, when the
// stored value is not an integer or the sum would overflow int64. Unlike Set, IncrBy is not
// idempotent: if the reply is lost, the increment may have been applied, and go-redis resends a
// command by itself after some network errors (a connection closed before the reply) unless the
// client was built with MaxRetries: -1. Do not retry a failed IncrBy blindly; read the value and
// reconcile, or use a client without retries for fenced increments. The fence orders writers; it
// does not deduplicate one writer's repeats, which share its token. Context behaviour and
// concurrency are those of Set.
func (f *RedisFence) IncrBy(ctx context.Context, key string, delta int64, tok Token) (int64, error) {
	return f.write(ctx, "incrby", key, tok, strconv.FormatInt(delta, 10))
}

// FencedIncr is one increment of [RedisFence.IncrByAll]: Delta added to the integer under Key,
// fenced by Token, the writer's token for that key (for a multi-key lock, [MultiLock.Token] of
// the lock key that protects Key).
type FencedIncr struct {
	Key   string
	Delta int64
	Token Token
}

// IncrByAll adds each increment to its key, as IncrBy does, if every token is at least the
// highest admitted before for its own key, and then records each token; otherwise it changes
// nothing. One script does all of it atomically: all the increments are applied, or none. This
// is the write of a transfer under a multi-key lock ([Client.DoMulti]): two separate IncrBy
// calls would let a holder that paused, and lost the lock on one account to a newer holder,
// still move money in or out of the other (docs/fencing.md, "Transfers").
//
// It returns the new values in the order given, and:
//   - a *StaleTokenError (errors.Is(err, ErrStaleToken)) for the first key whose token is below
//     the highest admitted for it: nothing was written;
//   - an error matching ErrInvalidArgument, with nothing sent, for no increments, more than
//     [MaxMultiKeys], a key that IncrBy would refuse, a zero token, a Delta of math.MinInt64,
//     two increments of one key (or of keys that share a token key, "x" and "{x}"), or, when the
//     fence writes through a *redis.ClusterClient, keys in more than one hash slot;
//   - a Redis error when an increment cannot be applied (WRONGTYPE, a value that is not an
//     integer, an overflow): the script undoes the increments before it, so nothing changed;
//   - a go-redis or network error: the increments may or may not have been applied, all or none
//     (see IncrBy on retries).
//
// Context behaviour and concurrency are those of Set.
func (f *RedisFence) IncrByAll(ctx context.Context, incs ...FencedIncr) ([]int64, error) {
	if f == nil || isNil(f.client) {
		return nil, invalidf("redis fence has no client")
	}
	if len(incs) == 0 || len(incs) > MaxMultiKeys {
		return nil, invalidf("fenced increments: %d, want 1 to MaxMultiKeys (%d)", len(incs), MaxMultiKeys)
	}
	keys := make([]string, 0, 2*len(incs))
	args := make([]any, 0, 2*len(incs))
	seen := make(map[string]bool, len(incs))
	_, cluster := f.client.(*redis.ClusterClient)
	for i, in := range incs {
		tokenKey, err := f.check(in.Key)
		if err != nil {
			return nil, err
		}
		switch {
		case in.Token == 0:
			return nil, invalidf("fenced increment of %q with token 0: tokens start at 1", quoteKey(in.Key))
		case in.Delta == math.MinInt64:
			return nil, invalidf("fenced increment of %q by math.MinInt64, which cannot be undone", quoteKey(in.Key))
		case seen[tokenKey]:
			return nil, invalidf("fenced increments: %q is given twice (or shares its token key with another key)", quoteKey(in.Key))
		case cluster && keySlot(in.Key) != keySlot(incs[0].Key):
			return nil, invalidf("fenced increments on a Redis Cluster: %q and %q are in different hash slots; give them a shared hash tag", quoteKey(incs[0].Key), quoteKey(in.Key))
		}
		seen[tokenKey] = true
		keys = append(keys, in.Key, tokenKey)
		args = append(args, incs[i].Token.String(), strconv.FormatInt(in.Delta, 10))
	}
	res, err := fenceIncrAllScript.Run(ctx, f.client, keys, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("redlock: fenced increments of %q: %w", quoteKey(incs[0].Key), err)
	}
	if len(res) == 3 && res[0] == int64(0) {
		i, _ := res[1].(int64)
		if i < 1 || int(i) > len(incs) {
			return nil, fmt.Errorf("redlock: fenced increments: unexpected reply %v", res)
		}
		highest, err := parseReplyToken(res[2])
		if err != nil {
			return nil, fmt.Errorf("redlock: fenced increments: %w", err)
		}
		in := incs[i-1]
		return nil, &StaleTokenError{Resource: in.Key, Got: in.Token, Highest: highest}
	}
	if len(res) != len(incs)+1 || res[0] != int64(1) {
		return nil, fmt.Errorf("redlock: fenced increments: unexpected reply %v", res)
	}
	out := make([]int64, len(incs))
	for i := range out {
		v, err := replyInt64(res[i+1])
		if err != nil {
			return nil, fmt.Errorf("redlock: fenced increments: %w", err)
		}
		out[i] = v
	}
	return out, nil
}

// Get returns the string stored under key and the highest token admitted for key, read
// together in one atomic step. When key holds no value, err matches redis.Nil (go-redis's
// "no such key"), value is "" and tok is still the highest token admitted (0 if there never was
// one: tokens are never 0). Other errors: ErrInvalidArgument, with nothing sent, for a nil
// client or a key that Set would reject; a Redis WRONGTYPE error when key holds a hash or another
// non-string type; go-redis and network errors, wrapping ctx.Err() when ctx ended. Get is safe
// for concurrent use.
func (f *RedisFence) Get(ctx context.Context, key string) (value string, tok Token, err error) {
	tokenKey, err := f.check(key)
	if err != nil {
		return "", 0, err
	}
	res, err := fenceGetScript.Run(ctx, f.client, []string{key, tokenKey}).Slice()
	if err != nil {
		return "", 0, fmt.Errorf("redlock: fenced get %q: %w", key, err)
	}
	if len(res) != 2 {
		return "", 0, fmt.Errorf("redlock: fenced get %q: unexpected reply %v", key, res)
	}
	if res[1] != nil {
		if tok, err = parseReplyToken(res[1]); err != nil {
			return "", 0, fmt.Errorf("redlock: fenced get %q: %w", key, err)
		}
	}
	if res[0] == nil {
		return "", tok, fmt.Errorf("redlock: fenced get %q: %w", key, redis.Nil)
	}
	value, ok := res[0].(string)
	if !ok {
		return "", 0, fmt.Errorf("redlock: fenced get %q: unexpected value %T", key, res[0])
	}
	return value, tok, nil
}

// Highest returns the highest token admitted for key, 0 when no write to key was ever admitted
// (or its token key was deleted). It reads the token key with one GET and works whatever type
// the data key holds. Errors: ErrInvalidArgument, with nothing sent, for the inputs that
// [RedisFence.Get] rejects; go-redis and network errors, wrapping ctx.Err() when ctx ended.
// Highest is safe for concurrent use.
func (f *RedisFence) Highest(ctx context.Context, key string) (Token, error) {
	tokenKey, err := f.check(key)
	if err != nil {
		return 0, err
	}
	s, err := f.client.Get(ctx, tokenKey).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("redlock: highest token of %q: %w", key, err)
	}
	tok, err := parseToken(s)
	if err != nil {
		return 0, fmt.Errorf("redlock: highest token of %q: %w", key, err)
	}
	return tok, nil
}

// write validates its arguments and runs fence_write.lua. It returns the script's result (the
// new value for incrby) or a *StaleTokenError.
func (f *RedisFence) write(ctx context.Context, op, key string, tok Token, opArgs ...any) (int64, error) {
	tokenKey, err := f.check(key)
	if err != nil {
		return 0, err
	}
	if tok == 0 {
		return 0, invalidf("fenced %s %q with token 0: tokens start at 1, and a Client made WithoutFencing mints none", op, key)
	}
	args := append([]any{tok.String(), op}, opArgs...)
	res, err := fenceWriteScript.Run(ctx, f.client, []string{key, tokenKey}, args...).Slice()
	if err != nil {
		return 0, fmt.Errorf("redlock: fenced %s %q: %w", op, key, err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("redlock: fenced %s %q: unexpected reply %v", op, key, res)
	}
	admitted, ok := res[0].(int64)
	if !ok {
		return 0, fmt.Errorf("redlock: fenced %s %q: unexpected reply %v", op, key, res)
	}
	if admitted == 0 {
		highest, err := parseReplyToken(res[1])
		if err != nil {
			return 0, fmt.Errorf("redlock: fenced %s %q: %w", op, key, err)
		}
		return 0, &StaleTokenError{Resource: key, Got: tok, Highest: highest}
	}
	n, err := replyInt64(res[1])
	if err != nil {
		return 0, fmt.Errorf("redlock: fenced %s %q: %w", op, key, err)
	}
	return n, nil
}

// replyInt64 reads an integer that a fence script returned: a decimal string, so that values
// above 2^53 stay exact (the scripts' numbers are doubles), or an integer reply (0 for set
// and hset).
func replyInt64(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected value reply %q", v)
		}
		return n, nil
	}
	return 0, fmt.Errorf("unexpected value reply %v (%T)", v, v)
}

// check validates the client and a data key, and returns the key's token key.
func (f *RedisFence) check(key string) (string, error) {
	if f == nil || isNil(f.client) {
		return "", invalidf("redis fence has no client")
	}
	return highestKey(key)
}

// highestKey returns the token key of a data key (see HighestTokenPrefix), built like
// fenceKey builds a lock's counter key, so that it shares the data key's cluster hash slot.
func highestKey(key string) (string, error) {
	// Data keys "x" and "{x}" share one token key (slotKey without split). Sharing can only
	// refuse a write (the record holds the higher of the two keys' tokens), never admit a stale
	// one, whereas a new name for "{x}" would start from an empty record after an upgrade and
	// admit a stale holder's write once.
	return slotKey(HighestTokenPrefix, key, false, reservedPrefixes...)
}

// parseReplyToken reads a token that a script returned as a bulk string.
func parseReplyToken(v any) (Token, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("unexpected token reply %v (%T)", v, v)
	}
	return parseToken(s)
}

// parseToken reads a token stored in decimal.
func parseToken(s string) (Token, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("token key holds %q, not a token", s)
	}
	return Token(n), nil
}
