package redlock

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// nodeCall is one acquire request sent to every node of a fan-out: the acquire script
// (fencing on) or a plain SET NX PX (WithoutFencing). run returns what acquireTally expects:
// a counter value ≥ 1 when our key was set, a value ≤ 0 when the key was present.
type nodeCall interface {
	run(ctx context.Context, rc redis.UniversalClient) (int64, error)
}

// setNXCall is the acquire without fencing: SET key id NX PX ttl, built once per fan-out.
// It reports 1 when the key was set, so that every node reports the same "counter" and the
// tally decides on its fast path, and 0 when the key was present. Unlike acquire.lua it
// cannot tell our own key (a SET that go-redis resent after losing the reply) from another
// holder's, so the caller must treat a refusal as possibly ours when it undoes.
type setNXCall struct{ args []any }

func newSetNXCall(key, id string, ttlMillis int64) *setNXCall {
	return &setNXCall{args: []any{"set", key, id, "px", ttlMillis, "nx"}}
}

func (sc *setNXCall) run(ctx context.Context, rc redis.UniversalClient) (int64, error) {
	err := rc.Do(ctx, sc.args...).Err()
	switch {
	case err == nil:
		return 1, nil
	case errors.Is(err, redis.Nil):
		return 0, nil
	}
	return 0, err
}
