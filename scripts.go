package redlock

import (
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

	acquireScript = redis.NewScript(acquireSrc)
	raiseScript   = redis.NewScript(raiseSrc)
	releaseScript = redis.NewScript(releaseSrc)
	extendScript  = redis.NewScript(extendSrc)
)
