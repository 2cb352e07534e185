package redlock

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, one file each under lua/, with their KEYS and ARGV in the file header.
// They run with EVALSHA and fall back to EVAL when a node answers NOSCRIPT (its script
// cache was lost by a restart or SCRIPT FLUSH).
var (
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/raise.lua
	raiseSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/extend.lua
	extendSrc string
	//go:embed lua/status.lua
	statusSrc string
	//go:embed lua/acquire_multi.lua
	acquireMultiSrc string
	//go:embed lua/extend_multi.lua
	extendMultiSrc string
	//go:embed lua/release_multi.lua
	releaseMultiSrc string
	//go:embed lua/heal.lua
	healSrc string

	acquireScript = newLua(acquireSrc)
	raiseScript   = newLua(raiseSrc)
	releaseScript = newLua(releaseSrc)
	extendScript  = newLua(extendSrc)
	statusScript  = newLua(statusSrc)

	acquireMultiScript = newLua(acquireMultiSrc)
	extendMultiScript  = newLua(extendMultiSrc)
	releaseMultiScript = newLua(releaseMultiSrc)
	healScript         = newLua(healSrc)
)

// lua is a script and its source, for the EVAL fallback.
type lua struct {
	*redis.Script
	src string
}

func newLua(src string) *lua { return &lua{Script: redis.NewScript(src), src: src} }

// command is one request built once per fan-out: its arguments are shared, read-only, by
// the per-node calls made from it.
type command struct {
	args   []any
	script *lua // non-nil for a script: "evalsha", sha1, numkeys, keys..., argv...
	kind   replyKind
}

// newScriptCall builds the EVALSHA command of a script.
func newScriptCall(s *lua, keys []string, argv ...any) *command {
	args := make([]any, 0, 3+len(keys)+len(argv))
	args = append(args, "evalsha", s.Hash(), len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	return &command{args: append(args, argv...), script: s, kind: replyInt}
}

// newSetNXCall is the acquire without fencing: SET key id NX PX ttl. It reports 1 when the
// key was set, so that every node reports the same "counter" and the tally decides on its
// fast path, and 0 when the key was present. Unlike acquire.lua it cannot tell our own key
// (a SET that go-redis resent after losing the reply) from another holder's, so a refusal
// may be ours when the attempt is undone.
func newSetNXCall(key, id string, ttlMillis int64) *command {
	return &command{args: []any{"set", key, id, "px", ttlMillis, "nx"}, kind: replySetNX}
}

// newCall makes a per-node call of the command for the transport.
func (cmd *command) newCall(tag uint8, s sink) *call {
	return &call{args: cmd.args, script: cmd.script, kind: cmd.kind, tag: tag, sink: s}
}

// run sends the command to one node directly, outside the transport, and returns its
// integer reply (for tests and tools).
func (cmd *command) run(ctx context.Context, rc redis.UniversalClient) (int64, error) {
	q := &nodeQueue{rc: rc}
	ev := decode(cmd.kind, q.write(ctx, []*call{cmd.newCall(0, nil)}, nil)[0])
	return ev.val, ev.err
}
