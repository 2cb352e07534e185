package redlock

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/model"
	"github.com/redis/go-redis/v9"
)

// TestRealModelScriptsMatchLua runs each script of lua/ on a real redis-server and its Go
// version in package model on the same inputs, and requires the same reply and the same
// state after: the lock key's holder and both counters. Inputs: both layouts, the key
// absent, ours or another holder's, each counter missing or at values below, equal to and
// above the seed and the target; and the same again with values about 2^53, where Lua's
// doubles lose integers, and at the int64 maximum, where the scripts refuse with an error
// reply and change nothing (model.Failed), and with seeds 5 s and an hour ahead of the
// node's clock (the second refused where it would be written; the model is given the node's
// TIME, read once: the outcomes do not change within the minutes the test takes). The small values' key-layout inputs also run the
// acquire and raise of the version before counter layouts (testdata/legacy) against
// model.OldAcquire and model.OldRaise.
func TestRealModelScriptsMatchLua(t *testing.T) {
	cluster := redisproc.StartT(t, 1, redisproc.Config{})
	rc := cluster.ClientsT(t)[0]
	ctx := ctxT(t, 2*time.Minute)
	set, err := newLockKeys("mt:k")
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"", "id1", "id2"} // holder 0 = absent; we are id1
	const two53, top = model.Counter(1) << 53, model.MaxCounter
	now, err := rc.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	clock := now.UnixMicro()
	soon, later := clock+5_000_000, clock+3_600_000_000
	type input struct {
		holder    int
		own, oth  model.Counter
		layout    CounterLayout
		arg, arg2 model.Counter
		large     bool
	}
	var inputs []input
	for _, g := range []struct {
		values, args, args2 []model.Counter
		large               bool
	}{
		{[]model.Counter{0, 3, 5, 6, 9}, []model.Counter{1, 5, 6, 10}, []model.Counter{1, 7}, false},
		{[]model.Counter{0, two53, two53 + 1, top - 1, top}, []model.Counter{1, soon, later, two53 + 1, top}, []model.Counter{1, two53 + 2}, true},
	} {
		for _, l := range []CounterLayout{SlotCounters, KeyCounters} {
			for h := range ids {
				for _, o := range g.values {
					for _, x := range g.values {
						for _, a := range g.args {
							for _, b := range g.args2 {
								inputs = append(inputs, input{h, o, x, l, a, b, g.large})
							}
						}
					}
				}
			}
		}
	}
	rules := model.Rules{Max: model.MaxCounter, Clock: clock}
	setUp := func(in input) (own, other string) {
		rc.FlushAll(ctx)
		own, other = set.counters(0, in.layout)
		if in.holder != 0 {
			rc.Set(ctx, set.keys[0], ids[in.holder], time.Minute)
		}
		for name, v := range map[string]model.Counter{own: in.own, other: in.oth} {
			if v != 0 {
				rc.Set(ctx, name, strconv.FormatInt(v, 10), 0)
			}
		}
		return own, other
	}
	read := func(own, other string) model.Key {
		var k model.Key
		switch h := rc.Get(ctx, set.keys[0]).Val(); h {
		case "":
		case "id1":
			k.Holder = 1
		case "id2":
			k.Holder = 2
		default:
			t.Fatalf("holder %q", h)
		}
		for name, p := range map[string]*model.Counter{own: &k.Own, other: &k.Other} {
			if s := rc.Get(ctx, name).Val(); s != "" {
				v, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				*p = v
			}
		}
		return k
	}
	// run returns the script's reply, or model.Failed for the scripts' own error replies.
	failed := 0
	run := func(s *lua, keys []string, argv ...any) int64 {
		v, err := newScriptCall(s, keys, argv...).run(ctx, rc)
		var rerr redis.Error
		if errors.As(err, &rerr) && strings.Contains(err.Error(), "redlock: ") {
			failed++
			return model.Failed
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	evalSrc := func(src string, keys []string, argv ...any) int64 {
		v, err := rc.Eval(ctx, src, keys, argv...).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	compare := func(what string, in input, got, want int64, gotK, wantK model.Key) {
		t.Helper()
		if got != want || gotK != wantK {
			t.Fatalf("%s on %+v: Lua %d %+v, model %d %+v", what, in, got, gotK, want, wantK)
		}
	}
	n, legacy := 0, 0
	for _, in := range inputs {
		slot := in.layout == SlotCounters
		start := model.Key{Holder: in.holder, Own: in.own, Other: in.oth}
		triple := set.triples(in.layout)

		// acquire.lua: the model returns 0 for "held"; Lua returns minus the PTTL (<= 0).
		own, other := setUp(in)
		got := run(acquireScript, triple, "id1", 60000, in.arg, 0, argFlag(slot))
		if got < 0 && got != model.Failed {
			got = 0
		}
		k := start
		want := rules.Acquire(&k, 1, in.arg, slot)
		compare("acquire", in, got, want, read(own, other), k)

		// acquire_multi.lua with one key (fenced): {1, token} or {0, left, i}; an error
		// reply is model.Failed.
		own, other = setUp(in)
		res, err := acquireMultiScript.Run(ctx, rc, triple, "id1", 60000, in.arg, 0, "1", argFlag(slot)).Slice()
		gotReply, gotTok := int64(0), int64(0)
		var rerr redis.Error
		switch {
		case errors.As(err, &rerr) && strings.Contains(err.Error(), "redlock: "):
			gotReply = model.Failed
		case err != nil:
			t.Fatal(err)
		case res[0] == int64(1):
			gotReply = 1
			if gotTok, err = strconv.ParseInt(res[1].(string), 10, 64); err != nil {
				t.Fatal(err)
			}
		}
		k = start
		toks, reply := rules.AcquireMulti([]*model.Key{&k}, 1, in.arg, slot)
		if gotReply != reply || (reply == 1 && gotTok != toks[0]) || read(own, other) != k {
			t.Fatalf("acquire_multi on %+v: Lua %v %v %+v, model %d %v %+v", in, res, err, read(own, other), reply, toks, k)
		}

		// raise.lua
		own, other = setUp(in)
		got = run(raiseScript, triple, "id1", in.arg, 0, argFlag(slot))
		k = start
		compare("raise", in, got, rules.Raise(&k, 1, in.arg, slot), read(own, other), k)

		// heal.lua: arg is the token, arg2 the seed.
		own, other = setUp(in)
		got = run(healScript, triple, "id1", 60000, 0, "1", in.arg2, argFlag(slot), in.arg)
		k = start
		compare("heal", in, got, rules.Heal(&k, 1, in.arg, in.arg2, slot), read(own, other), k)

		// extend.lua and release.lua
		own, other = setUp(in)
		got = run(extendScript, set.keys, "id1", 60000)
		k = start
		compare("extend", in, got, model.Extend(&k, 1), read(own, other), k)
		own, other = setUp(in)
		got = run(releaseScript, set.keys, "id1")
		k = start
		compare("release", in, got, model.Release(&k, 1), read(own, other), k)

		// The client of the version before counter layouts (testdata/legacy): its acquire and
		// raise know only the per-key counter L, the own counter of the key layout's inputs,
		// and must leave the slot counter (Other) as it is.
		if in.layout == KeyCounters && !in.large {
			own, other = setUp(in)
			got = evalSrc(legacyAcquireSrc, []string{set.keys[0], own}, "id1", 60000, in.arg, 0)
			if got < 0 {
				got = 0
			}
			k = start
			compare("legacy acquire", in, got, model.OldAcquire(&k, 1, in.arg), read(own, other), k)
			own, other = setUp(in)
			got = evalSrc(legacyRaiseSrc, []string{set.keys[0], own}, "id1", in.arg, 0)
			k = start
			compare("legacy raise", in, got, model.OldRaise(&k, 1, in.arg), read(own, other), k)
			legacy++
		}
		n++
	}
	small := 0
	for _, in := range inputs {
		if !in.large && in.layout == KeyCounters {
			small++
		}
	}
	if n != len(inputs) || n < 2500 || legacy != small || legacy < 500 || failed == 0 {
		t.Fatalf("ran %d of %d inputs, %d with the legacy scripts, %d error replies", n, len(inputs), legacy, failed)
	}
	t.Logf("%d inputs × 6 scripts agree (%d error replies, each with nothing changed), and %d of them × the 2 legacy scripts", n, failed, legacy)
}
