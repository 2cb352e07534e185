// Package redislog holds the go-redis logger the CLI and the tests install: one that drops
// go-redis's own log lines (such as dial retries to a node that is down), because the callers
// report every error themselves.
package redislog

import "context"

// Discard is a go-redis logger (see redis.SetLogger) that drops every line. It is safe for
// concurrent use.
type Discard struct{}

// Printf drops the line.
func (Discard) Printf(context.Context, string, ...any) {}
