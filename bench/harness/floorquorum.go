package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// acquireLua returns the library's acquire script as TryAcquire sends it (lua/acquire_fast.lua
// in front of lua/counters.lua, the fence-counter rules, and lua/acquire.lua), read from the repository next to
// this module (the harness is always built from its source tree), and where it came from.
// A copy kept here would drift from the library's script and price the wrong thing.
func acquireLua() (src, from string, err error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", "", errors.New("harness: cannot locate lua/acquire.lua: no caller information")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "lua")
	parts := map[string]string{}
	for _, f := range []string{"acquire_fast.lua", "counters.lua", "acquire.lua"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", "", fmt.Errorf("harness: read the library's acquire script: %w", err)
		}
		parts[f] = string(b)
	}
	// As the library composes it (withFastPath in scripts.go): the fast path in front, the
	// general path behind it as a function. TestFloorsAcquire fails when the two drift apart.
	src = parts["acquire_fast.lua"] + "local function general(tried)\n" + parts["counters.lua"] +
		parts["acquire.lua"] + "\nend\nreturn general(tried)\n"
	return src, "lua/acquire_fast.lua + lua/counters.lua + lua/acquire.lua", nil
}

// floorQuorum is a minimal Redlock without the library: the acquire command sent to every
// node from one goroutine each, returning as soon as a quorum agreed (the stragglers finish
// on their own), and the same for the compare-and-delete. With script set, the acquire
// command is the library's own acquire.lua (fence counter included) instead of SET NX PX,
// so the difference between the two prices the fencing script alone.
type floorQuorum struct {
	cs     []*redis.Client
	script *redis.Script // nil: SET NX PX
}

func newFloorQuorum(addrs []string, script *redis.Script) *floorQuorum {
	return &floorQuorum{cs: newClients(addrs), script: script}
}

// counterIdle is the library's default fence-counter idle TTL in milliseconds.
var counterIdle = redlock.DefaultCounterIdleTTL.Milliseconds()

// acquireLuaArgs are the keys and arguments of the library's acquire.lua (TryAcquire's
// form, with no queue) for key: the slot layout's keys, the lock key, its slot counter (here
// one per key, in the key's slot: the names only matter on a cluster) and its per-key
// counter; then the holder value, the PX, the seed, the counters' idle TTL and the layout.
func acquireLuaArgs(key string, seed int64) ([]string, []any) {
	return []string{key, redlock.SlotCounterPrefix + "{" + key + "}", redlock.FencePrefix + "{" + key + "}"},
		[]any{floorValue, lockTTL.Milliseconds(), seed, counterIdle, "1"}
}

func (f *floorQuorum) try(ctx context.Context, key string) (any, error) {
	q := len(f.cs)/2 + 1
	oks := make(chan bool, len(f.cs))
	seed := time.Now().UnixMicro()
	for _, c := range f.cs {
		go func() {
			if f.script == nil {
				ok, err := c.SetNX(ctx, key, floorValue, lockTTL).Result()
				oks <- ok && err == nil
				return
			}
			keys, args := acquireLuaArgs(key, seed)
			v, err := f.script.Run(ctx, c, keys, args...).Int64()
			oks <- err == nil && v > 0
		}()
	}
	agreed := 0
	for i := range f.cs {
		if <-oks {
			agreed++
		}
		if agreed >= q {
			return key, nil
		}
		if agreed+len(f.cs)-1-i < q {
			break
		}
	}
	return nil, errFloorNotAcquired
}

func (f *floorQuorum) wait(ctx context.Context, key string) (any, error) { return f.try(ctx, key) }

func (f *floorQuorum) release(ctx context.Context, h any) error {
	key := h.(string)
	q := len(f.cs)/2 + 1
	oks := make(chan bool, len(f.cs))
	for _, c := range f.cs {
		go func() {
			v, err := releaseScript.Run(ctx, c, []string{key}, floorValue).Int64()
			oks <- err == nil && v == 1
		}()
	}
	agreed := 0
	for i := range f.cs {
		if <-oks {
			agreed++
		}
		if agreed >= q {
			return nil
		}
		if agreed+len(f.cs)-1-i < q {
			break
		}
	}
	return errors.New("floor: release without quorum")
}

func (f *floorQuorum) close() { closeClients(f.cs) }
