package redlock

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, one file each under lua/, with their KEYS and ARGV in the file header.
// go-redis runs them with EVALSHA and falls back to EVAL when a node answers NOSCRIPT
// (its script cache was lost by a restart or SCRIPT FLUSH).
var (
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/raise.lua
	raiseSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/extend.lua
	extendSrc string

	acquireScript = newLua(acquireSrc)
	raiseScript   = newLua(raiseSrc)
	releaseScript = newLua(releaseSrc)
	extendScript  = newLua(extendSrc)
)

// lua is a script and its source, for the EVAL fallback of scriptCall.
type lua struct {
	*redis.Script
	src string
}

func newLua(src string) *lua { return &lua{Script: redis.NewScript(src), src: src} }

// scriptCall is one script invocation for a fan-out: the EVALSHA command is built once and
// shared, read-only, by the per-node calls, instead of once per node as redis.Script.Run
// does (which was a quarter of the allocations of an acquire and release).
type scriptCall struct {
	s    *lua
	args []any // "evalsha", sha1, numkeys, keys..., argv...
}

func newScriptCall(s *lua, keys []string, argv ...any) *scriptCall {
	args := make([]any, 0, 3+len(keys)+len(argv))
	args = append(args, "evalsha", s.Hash(), len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	return &scriptCall{s: s, args: append(args, argv...)}
}

// run sends the call to one node and returns its integer reply. A node that has lost its
// script cache (NOSCRIPT after a restart or SCRIPT FLUSH) gets the script by EVAL instead.
func (sc *scriptCall) run(ctx context.Context, rc redis.UniversalClient) (int64, error) {
	v, err := rc.Do(ctx, sc.args...).Int64()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		eval := make([]any, len(sc.args))
		copy(eval, sc.args)
		eval[0], eval[1] = "eval", sc.s.src
		v, err = rc.Do(ctx, eval...).Int64()
	}
	return v, err
}
