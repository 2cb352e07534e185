package redlock

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestReleaseFastMatchesGeneral runs the release script as it is sent (release_fast.lua in
// front, release.lua behind it as the general path) and release.lua alone behind queue.lua
// (the script as it was before the fast path) on the same node states: the lock key ours,
// another holder's, missing or of another type; no queue, a queue whose head is alive, whose
// only member is the releasing Client, whose head's liveness ran out, or a queue key of
// another type; with every argument shape the library sends (the undo without announcement,
// the announcement alone, the queue's with each ticket and with no turn prefix) and one
// short of arguments. Each pair must give the same reply (value or error text), leave the
// same keys (values, and node times within a second) and publish the same messages, in
// order. It fails if the fast path answers a release that a queue should have handed over,
// skips the announcement, or deletes a key that is not ours.
func TestReleaseFastMatchesGeneral(t *testing.T) {
	general := queueSrc + releaseSrc
	forEachStore(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := ctxT(t, 60*time.Second)
		const (
			key, queue, waiters = "{fr}:k", "{fr}:q", "{fr}:w"
			id, member          = "me", "m1"
			done                = "zz:done"
		)
		ps := rc.PSubscribe(ctx, "*")
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
			t.Fatal(err)
		}
		msgs := ps.Channel()
		// published returns the messages published since the last call, up to a marker
		// published after them on the same node (so in order after them).
		published := func() []string {
			t.Helper()
			if err := rc.Publish(ctx, done, "").Err(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for {
				select {
				case m := <-msgs:
					if m.Channel == done {
						return got
					}
					got = append(got, m.Channel+" "+m.Payload)
				case <-ctx.Done():
					t.Fatal("the marker message did not arrive")
				}
			}
		}
		nowMS := func() int64 { return time.Now().UnixMilli() }
		holders := []string{"", id, "other", "<a hash>"}
		queues := []string{"", "alive head", "only member", "expired head", "<a string>"}
		reset := func(holder, q string) {
			t.Helper()
			if err := rc.Del(ctx, key, queue, waiters).Err(); err != nil {
				t.Fatal(err)
			}
			switch holder {
			case "":
			case "<a hash>":
				rc.HSet(ctx, key, "f", "1")
			default:
				rc.Set(ctx, key, holder, 5*time.Second)
			}
			switch q {
			case "alive head":
				rc.ZAdd(ctx, queue, redis.Z{Score: 1, Member: "w1"}, redis.Z{Score: 2, Member: member})
				rc.HSet(ctx, waiters, "w1", nowMS()+10_000, member, nowMS()+10_000)
			case "only member":
				rc.ZAdd(ctx, queue, redis.Z{Score: 1, Member: member})
				rc.HSet(ctx, waiters, member, nowMS()+10_000)
			case "expired head":
				rc.ZAdd(ctx, queue, redis.Z{Score: 1, Member: "w0"}, redis.Z{Score: 2, Member: "w1"})
				rc.HSet(ctx, waiters, "w0", nowMS()-10_000, "w1", nowMS()+10_000)
			case "<a string>":
				rc.Set(ctx, queue, "x", 0)
			}
			if q != "" {
				rc.PExpire(ctx, queue, 10*time.Second)
				rc.PExpire(ctx, waiters, 10*time.Second)
			}
		}
		dump := func() (string, []int64) { return dumpKeys(ctx, rc, key, queue, waiters) }
		run := func(src string, keys []string, args []any) string {
			v, err := rc.Eval(ctx, src, keys, args...).Result()
			if err != nil {
				return "error: " + scriptErrText(err)
			}
			return fmt.Sprintf("%T %v", v, v)
		}
		channel := wakeChannel(key)
		qkeys := []string{key, queue, waiters}
		type shape struct {
			keys []string
			args []any
		}
		shapes := []shape{
			{[]string{key}, []any{id}},                                                         // an undo, or WithoutWakeups
			{[]string{key}, []any{id, channel}},                                                // announced, without the queue
			{qkeys, []any{id, "", "", member, "0", "5000"}},                                    // the undo of a queued attempt
			{qkeys, []any{id, channel, turnChannelPrefix, member, "0", "5000"}},                // a release, no next waiter
			{qkeys, []any{id, channel, turnChannelPrefix, member, "", "5000"}},                 // the place kept
			{qkeys, []any{id, channel, turnChannelPrefix, member, "1796000000000000", "5000"}}, // a next waiter
			{qkeys, []any{id, channel, "", member, "1796000000000000", "5000"}},                // no turn prefix
			{qkeys, []any{id}}, // short of arguments
		}
		fast, handed := 0, 0
		for _, sh := range shapes {
			for _, h := range holders {
				for _, q := range queues {
					reset(h, q)
					want := run(general, sh.keys, sh.args)
					wantState, wantTimes := dump()
					wantMsgs := published()
					reset(h, q)
					got := run(releaseScript.src, sh.keys, sh.args)
					gotState, gotTimes := dump()
					gotMsgs := published()
					if got != want || gotState != wantState || !nearTimes(gotTimes, wantTimes) || !slices.Equal(gotMsgs, wantMsgs) {
						t.Fatalf("holder %q, queue %q, keys %q, args %q:\ngeneral: %s %q\n%s%v\nsent:    %s %q\n%s%v",
							h, q, sh.keys, sh.args, want, wantMsgs, wantState, wantTimes, got, gotMsgs, gotState, gotTimes)
					}
					if h == id && q == "" {
						fast++
					}
					if h == id && q == "alive head" && slices.ContainsFunc(wantMsgs, func(m string) bool {
						return strings.HasPrefix(m, turnChannelPrefix)
					}) {
						handed++
					}
				}
			}
		}
		if fast != len(shapes) || handed == 0 {
			t.Fatalf("%d releases of ours with nobody queued, %d handoffs: the paths were hardly compared", fast, handed)
		}
	})
}
