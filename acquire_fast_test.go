package redlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// TestAcquireFastMatchesGeneral runs the acquire scripts as they are sent (acquire_fast.lua
// in front, the general path behind it) and the general path alone (acquire.lua behind
// counters.lua and queue.lua, as the scripts were before the fast path) on the same node
// states: held, free, ours; waiters queued or not; counters missing, small, at the edge of
// Lua's exact numbers, beyond it, at the maximum, holding something else or of another type
// (a hash: the fast path's GET must not end the script with the key set); the queue's states
// of a handoff (our waiter at the head, alone, with its liveness run out or "nan", another
// waiter at the head, a queue key of another type); seeds of now,
// far ahead and malformed; bad PX and idle TTLs; both layouts; queued with and without
// fencing. Each pair must give the same reply (value or error text) and leave the same keys
// (values, and TTLs within a second). It fails if the fast path mints a different token,
// skips a check, or leaves a write behind a refusal.
func TestAcquireFastMatchesGeneral(t *testing.T) {
	const wrongType = "<a hash>" // a counter state: the counter key is a hash
	general := "local tried = false\n" + countersSrc + acquireSrc
	generalQueued := "local tried = false\n" + countersSrc + queueSrc + acquireSrc
	forEachStore(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := ctxT(t, 60*time.Second)
		const (
			key, own, other = "{fa}:k", "{fa}:own", "{fa}:other"
			queue, waiters  = "{fa}:q", "{fa}:w"
		)
		now := time.Now().UnixMicro()
		nowS := strconv.FormatInt(now, 10)
		counters := []string{"", "0", "5", "999999999999999", "8999999999999998", "8999999999999999",
			"9000000000000000", strconv.FormatInt(now+5_000_000, 10), strconv.FormatInt(now-1, 10),
			"abc", "007", "9223372036854775807", "9223372036854775806", wrongType}
		seeds := []string{nowS, strconv.FormatInt(now+20_000_000, 10), strconv.FormatInt(now+9_000_000, 10),
			"0", "abc", "3", "89999999999999990", "8999999999999999"}
		idles := []string{"604800000", "0", "abc", "-5"}
		pxs := []string{"8000", "0", "abc", "2000"}
		holders := []string{"", "me", "other"}

		type state struct{ holder, own, other string }
		// The queue on the node: none, another waiter at the head, ours (m1) at the head
		// with another behind it, ours alone, ours at the head with its liveness run out or
		// "nan", or a queue key of another type.
		queues := []string{"", "other head", "our head", "ours alone", "our head expired", "our head, liveness nan", "<a string>"}
		reset := func(s state, q string) {
			t.Helper()
			if err := rc.Del(ctx, key, own, other, queue, waiters).Err(); err != nil {
				t.Fatal(err)
			}
			if s.holder != "" {
				rc.Set(ctx, key, s.holder, 5*time.Second)
			}
			for _, c := range []struct{ name, v string }{{own, s.own}, {other, s.other}} {
				switch c.v {
				case "":
				case wrongType:
					rc.HSet(ctx, c.name, "f", "1")
				default:
					rc.Set(ctx, c.name, c.v, 0)
				}
			}
			if s.own != "" {
				rc.PExpire(ctx, own, time.Hour)
			}
			alive := time.Now().UnixMilli() + 10_000
			switch q {
			case "other head":
				rc.ZAdd(ctx, queue, redis.Z{Score: 1, Member: "w1"}, redis.Z{Score: 2, Member: "m1"})
				rc.HSet(ctx, waiters, "w1", alive, "m1", alive)
			case "our head":
				rc.ZAdd(ctx, queue, redis.Z{Score: 1, Member: "m1"}, redis.Z{Score: 2, Member: "w1"})
				rc.HSet(ctx, waiters, "m1", alive, "w1", alive, "", alive-20_000)
			case "ours alone":
				rc.ZAdd(ctx, queue, redis.Z{Score: 1, Member: "m1"})
				rc.HSet(ctx, waiters, "m1", alive)
			case "our head expired":
				rc.ZAdd(ctx, queue, redis.Z{Score: 1, Member: "m1"}, redis.Z{Score: 2, Member: "w1"})
				rc.HSet(ctx, waiters, "m1", alive-20_000, "w1", alive)
			case "our head, liveness nan": // Lua reads "nan" as a number, below nothing
				rc.ZAdd(ctx, queue, redis.Z{Score: 1, Member: "m1"}, redis.Z{Score: 2, Member: "w1"})
				rc.HSet(ctx, waiters, "m1", "nan", "w1", alive)
			case "<a string>":
				rc.Set(ctx, queue, "x", 0)
			}
			if q != "" {
				rc.PExpire(ctx, queue, 10*time.Second)
				rc.PExpire(ctx, waiters, 10*time.Second)
			}
		}
		dump := func() (string, []int64) { return dumpKeys(ctx, rc, key, own, other, queue, waiters) }
		// run returns the reply as text, and for a refusal apart from it the milliseconds
		// left (the holder's PTTL, which moves between the two runs).
		run := func(src string, keys []string, args []any, scale int64) (string, []int64) {
			v, err := rc.Eval(ctx, src, keys, args...).Result()
			if err != nil {
				return "error: " + scriptErrText(err), nil
			}
			if n, ok := v.(int64); ok && n <= 0 {
				left, rank := -n/scale, -n%scale
				return fmt.Sprintf("refused: rank %d", rank), []int64{left}
			}
			return fmt.Sprintf("%T %v", v, v), nil
		}
		rng := rand.New(rand.NewPCG(1, 2))
		pick := func(s []string) string { return s[rng.IntN(len(s))] }
		cases, usual, fast, heads := 900, 120, 0, 0
		for i := range cases {
			s := state{holder: pick(holders), own: pick(counters), other: pick(counters)}
			if i < usual { // the usual case first, many times: a free key and plain values
				s = state{own: counters[rng.IntN(4)], other: []string{"", "", "5", counters[8]}[rng.IntN(4)]}
			}
			queuedCall := rng.IntN(3) == 0
			queuedState := ""
			if queuedCall && rng.IntN(3) != 0 {
				queuedState = queues[1+rng.IntN(len(queues)-1)]
			}
			if i < usual/2 { // half of them a hot key's handoff: queued, the head's turn
				queuedCall, queuedState = true, []string{"our head", "ours alone", "other head", "our head expired", "our head, liveness nan"}[rng.IntN(5)]
			}
			seed, idle, px := nowS, "604800000", "8000"
			if i >= usual {
				seed, idle, px = pick(seeds), pick(idles), pick(pxs)
			}
			slot := strconv.Itoa(rng.IntN(2))
			id := "me"
			keys := []string{key, own, other}
			args := []any{id, px, seed, idle, slot}
			src, ref, scale := acquireScript.src, general, int64(1)
			if queuedCall {
				scale = 65536
				keys = append(keys, queue, waiters)
				args = append(args, "m1", strconv.FormatInt(now, 10), "5000", "200", strconv.Itoa(rng.IntN(2)), "redlock:turn:")
				src, ref = acquireQueuedScript.src, generalQueued
			}
			reset(s, queuedState)
			want, wantLeft := run(ref, keys, args, scale)
			wantState, wantTimes := dump()
			reset(s, queuedState)
			got, gotLeft := run(src, keys, args, scale)
			gotState, gotTimes := dump()
			wantTimes, gotTimes = append(wantTimes, wantLeft...), append(gotTimes, gotLeft...)
			if got != want || gotState != wantState || !nearTimes(gotTimes, wantTimes) {
				t.Fatalf("case %d: state %+v queued call %v, queue %v, args %q:\ngeneral: %s\n%s%v\nsent:    %s\n%s%v",
					i, s, queuedCall, queuedState, args, want, wantState, wantTimes, got, gotState, gotTimes)
			}
			if !strings.HasPrefix(want, "error") && !strings.HasPrefix(want, "refused") && s.holder == "" {
				fast++
				if queuedState == "our head" || queuedState == "ours alone" {
					heads++
				}
			}
		}
		if fast < usual/2 || heads < 20 {
			t.Fatalf("%d of %d cases granted the lock, %d of them to the queue's head: the fast path was hardly compared", fast, cases, heads)
		}
	})
}

// scriptErrText is an error reply's text without what tells two scripts apart: the line
// numbers and the stack traceback miniredis writes into it (":137: ", " stack traceback:
// …") and redis-server's script SHA and line behind it (" script: …").
func scriptErrText(err error) string {
	msg := err.Error()
	for _, tail := range []string{" script: ", " stack traceback:"} {
		if i := strings.Index(msg, tail); i >= 0 {
			msg = msg[:i]
		}
	}
	return scriptLine.ReplaceAllString(msg, "")
}

var scriptLine = regexp.MustCompile(`:[0-9]+: ?`)

// dumpKeys returns keys as text, to compare what two scripts left on a node: each key's type,
// its value (a string; a sorted set with its scores; a hash's fields) and whether it expires;
// and apart from the text what moves between two runs, in order, for nearTimes: each expiring
// key's milliseconds to live and a hash's values (node times in ms).
func dumpKeys(ctx context.Context, rc redis.UniversalClient, keys ...string) (string, []int64) {
	var b strings.Builder
	var times []int64
	for _, k := range keys {
		ty := rc.Type(ctx, k).Val()
		ttl := rc.PTTL(ctx, k).Val()
		fmt.Fprintf(&b, "%s %s ", k, ty)
		if ttl > 0 {
			b.WriteString("expires ")
			times = append(times, ttl.Milliseconds())
		}
		switch ty {
		case "string":
			b.WriteString(rc.Get(ctx, k).Val())
		case "zset":
			fmt.Fprint(&b, rc.ZRangeWithScores(ctx, k, 0, -1).Val())
		case "hash":
			m := rc.HGetAll(ctx, k).Val()
			fs := make([]string, 0, len(m))
			for f := range m {
				fs = append(fs, f)
			}
			sort.Strings(fs)
			fmt.Fprint(&b, fs)
			for _, f := range fs {
				n, _ := strconv.ParseInt(m[f], 10, 64)
				times = append(times, n)
			}
		}
		b.WriteString("\n")
	}
	return b.String(), times
}

// nearTimes reports whether two runs' node times and milliseconds left (dumpKeys) agree
// within a second.
func nearTimes(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if d := a[i] - b[i]; d < -1000 || d > 1000 {
			return false
		}
	}
	return true
}

// TestRealAcquireFastPartialQueueACL: an ACL user with the queue's reads (EXISTS, ZRANGE,
// HGET, TIME) but without one of the writes that take the head out of the queue (ZREM, ZCARD,
// HDEL) gets the same reply and leaves the same keys with the script as sent as with the
// general path, which runs that work under pcall: the lock granted, the refused step skipped.
// Before, the fast path ran it with redis.call, and the head's acquire ended in an error reply
// with the lock key and its counter written (found by a newcomer: a hot key nearly stopped).
func TestRealAcquireFastPartialQueueACL(t *testing.T) {
	const pw = "pqSecret"
	general := "local tried = false\n" + countersSrc + queueSrc + acquireSrc
	const key, own, other, queue, waiters = "{pq}:k", "{pq}:own", "{pq}:other", "{pq}:q", "{pq}:w"
	keys := []string{key, own, other, queue, waiters}
	for _, missing := range []string{"zrem", "zcard", "hdel"} {
		t.Run("without "+missing, func(t *testing.T) {
			acl := append([]string{"--user", "lock", "on", ">" + pw, "~*", "&*", "-@all"}, strings.Fields(aclCommands)...)
			for _, c := range strings.Fields("+zadd +zrem +zrange +zrank +zcard +hget +hdel") {
				if c != "+"+missing {
					acl = append(acl, c)
				}
			}
			cluster := redisproc.StartT(t, 1, redisproc.Config{ExtraArgs: acl})
			admin := cluster.ClientsT(t)[0]
			user := aclUserClients(t, cluster.Addrs(), pw)[0]
			ctx := ctxT(t, 20*time.Second)
			seed := strconv.FormatInt(time.Now().UnixMicro(), 10)
			run := func(src string) (string, string) {
				t.Helper()
				if err := admin.Del(ctx, keys...).Err(); err != nil {
					t.Fatal(err)
				}
				alive := time.Now().UnixMilli() + 10_000
				admin.ZAdd(ctx, queue, redis.Z{Score: 1, Member: "m1"}, redis.Z{Score: 2, Member: "w1"})
				admin.HSet(ctx, waiters, "m1", alive, "w1", alive)
				reply := ""
				v, err := user.Eval(ctx, src, keys, "me", "8000", seed, "604800000", "1", "m1", "1", "5000", "200", "1", turnChannelPrefix).Result()
				if err != nil {
					reply = "error: " + scriptErrText(err)
				} else {
					reply = fmt.Sprint(v)
				}
				state, _ := dumpKeys(ctx, admin, keys...)
				return reply, state
			}
			want, wantState := run(general)
			got, gotState := run(acquireQueuedScript.src)
			if got != want || gotState != wantState {
				t.Fatalf("general: %s\n%s\nsent:    %s\n%s", want, wantState, got, gotState)
			}
			if want != seed {
				t.Fatalf("general path: %s; want the lock, token %s (the refused step skipped)", want, seed)
			}
		})
	}
}
