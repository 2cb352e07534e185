package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// The floors of scenario p: the library's real acquire script and the compare-and-delete
// sent to all 5 nodes through plain clients, returning at a quorum, with concurrent calls to
// one node sharing round trips. No token checks, no timeouts of their own, no undo: what
// the commands cost when the client batches them, for the library's transport to approach.

// batchSenders is how many pipelines a batching node client keeps in flight at most.
const batchSenders = 2

// maxBatch caps the commands of one pipeline.
const maxBatch = 1024

// batchReq is one command for one node; the sender answers on out.
type batchReq struct {
	cmd     *redis.Cmd
	release bool // reply 1 means done; otherwise a positive reply means acquired
	out     chan<- bool
}

// batchNode batches the concurrent commands for one node: callers put requests on reqs,
// each sender takes one, adds whatever else is already waiting (up to maxBatch) and sends
// them as one go-redis Pipeline.
type batchNode struct {
	c    *redis.Client
	reqs chan *batchReq
	wg   sync.WaitGroup
}

func (n *batchNode) send() {
	batch := make([]*batchReq, 0, maxBatch)
	for r := range n.reqs {
		batch = append(batch[:0], r)
	drain:
		for len(batch) < maxBatch {
			select {
			case r, ok := <-n.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		pipe := n.c.Pipeline()
		for _, r := range batch {
			_ = pipe.Process(context.Background(), r.cmd)
		}
		_, _ = pipe.Exec(context.Background()) // each command carries its own error
		for _, r := range batch {
			v, err := r.cmd.Int64()
			if r.release {
				r.out <- err == nil && v == 1
			} else {
				r.out <- err == nil && v > 0
			}
		}
	}
}

// floorBatch is the go-redis floor of p: per node, a batching loop over a go-redis client.
type floorBatch struct {
	nodes    []*batchNode
	acq, rel string // script SHA1s, loaded on every node at the start
}

func newFloorBatch(ctx context.Context, addrs []string, acquireSrc string) (*floorBatch, error) {
	f := &floorBatch{}
	acq, rel := redis.NewScript(acquireSrc), redis.NewScript(releaseSrc)
	f.acq, f.rel = acq.Hash(), rel.Hash()
	for _, c := range newClients(addrs) {
		n := &batchNode{c: c, reqs: make(chan *batchReq, maxBatch)}
		f.nodes = append(f.nodes, n)
		for range batchSenders {
			n.wg.Go(n.send)
		}
	}
	for _, n := range f.nodes {
		// EVALSHA in a pipeline has no EVAL fallback: load both scripts first (the nodes are
		// not restarted while p runs).
		if err := errors.Join(acq.Load(ctx, n.c).Err(), rel.Load(ctx, n.c).Err()); err != nil {
			f.close()
			return nil, err
		}
	}
	return f, nil
}

// quorum sends one command per node (built by mk) and waits for a quorum of positive
// replies, or for so many negative ones that no quorum is left.
func (f *floorBatch) quorum(ctx context.Context, release bool, mk func() *redis.Cmd) bool {
	out := make(chan bool, len(f.nodes))
	for _, n := range f.nodes {
		n.reqs <- &batchReq{cmd: mk(), release: release, out: out}
	}
	return tally(out, len(f.nodes))
}

// tally reads n replies from out and reports whether a majority agreed, returning as soon
// as that is decided (the rest are left in out's buffer).
func tally(out <-chan bool, n int) bool {
	q := n/2 + 1
	agreed := 0
	for i := range n {
		if <-out {
			agreed++
		}
		if agreed >= q {
			return true
		}
		if agreed+n-1-i < q {
			return false
		}
	}
	return false
}

func (f *floorBatch) try(ctx context.Context, key string) (any, error) {
	keys, args := acquireLuaArgs(key, time.Now().UnixMicro())
	ok := f.quorum(ctx, false, func() *redis.Cmd {
		vec := append([]any{"evalsha", f.acq, len(keys)}, anys(keys)...)
		return redis.NewCmd(ctx, append(vec, args...)...)
	})
	if !ok {
		return nil, errFloorNotAcquired
	}
	return key, nil
}

// anys converts strings to the arguments of a go-redis command.
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func (f *floorBatch) wait(ctx context.Context, key string) (any, error) { return f.try(ctx, key) }

func (f *floorBatch) release(ctx context.Context, h any) error {
	key := h.(string)
	if !f.quorum(ctx, true, func() *redis.Cmd { return redis.NewCmd(ctx, "evalsha", f.rel, 1, key, floorValue) }) {
		return errors.New("floor: release without quorum")
	}
	return nil
}

func (f *floorBatch) close() {
	for _, n := range f.nodes {
		close(n.reqs)
		n.wg.Wait()
		_ = n.c.Close()
	}
}

// floorRueidis is the same fan-out through github.com/redis/rueidis, whose client pipelines
// the commands that goroutines issue concurrently on its connection by itself: one
// goroutine per node call, as in floorQuorum.
type floorRueidis struct {
	cs       []rueidis.Client
	acq, rel *rueidis.Lua
}

func newFloorRueidis(addrs []string, acquireSrc string) (*floorRueidis, error) {
	f := &floorRueidis{acq: rueidis.NewLuaScript(acquireSrc), rel: rueidis.NewLuaScript(releaseSrc)}
	for _, a := range addrs {
		// No client-side cache (the floor reads nothing back) and no cluster probing.
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}, DisableCache: true, ForceSingleClient: true})
		if err != nil {
			f.close()
			return nil, err
		}
		f.cs = append(f.cs, c)
	}
	return f, nil
}

func (f *floorRueidis) fan(ctx context.Context, s *rueidis.Lua, release bool, keys, args []string) bool {
	out := make(chan bool, len(f.cs))
	for _, c := range f.cs {
		go func() {
			v, err := s.Exec(ctx, c, keys, args).AsInt64()
			if release {
				out <- err == nil && v == 1
			} else {
				out <- err == nil && v > 0
			}
		}()
	}
	return tally(out, len(f.cs))
}

func (f *floorRueidis) try(ctx context.Context, key string) (any, error) {
	keys, vals := acquireLuaArgs(key, time.Now().UnixMicro())
	args := make([]string, len(vals))
	for i, v := range vals {
		args[i] = fmt.Sprint(v)
	}
	if !f.fan(ctx, f.acq, false, keys, args) {
		return nil, errFloorNotAcquired
	}
	return key, nil
}

func (f *floorRueidis) wait(ctx context.Context, key string) (any, error) { return f.try(ctx, key) }

func (f *floorRueidis) release(ctx context.Context, h any) error {
	if !f.fan(ctx, f.rel, true, []string{h.(string)}, []string{floorValue}) {
		return errors.New("floor: release without quorum")
	}
	return nil
}

func (f *floorRueidis) close() {
	for _, c := range f.cs {
		c.Close()
	}
}
