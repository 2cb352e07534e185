package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

const (
	heldTTL = 3 * time.Second // the lock TTL of scenario held
	// heldAcquireLimit bounds the wait for all H to hold their lock; the hold window starts
	// then with those that do, and the acquires still retrying are cancelled after it.
	heldAcquireLimit = 30 * time.Second
)

// Targets of held, per held lock.
const (
	heldGoroutineSlack = 200  // goroutines allowed on top of one per held lock
	heldHeapPerLock    = 4096 // bytes
	heldBatching       = 10   // renewals per round trip
	heapSamples        = 8    // heap readings during the window
)

// rtCounter is a go-redis hook that counts round trips from the client side: every command
// sent on its own is one round trip, every pipeline one more, whatever it carries. cmds
// counts the script calls among them (EVALSHA, or EVAL after NOSCRIPT): in the hold
// window, the renewals; the HELLO and CLIENT SETINFO of connections dialed then are round
// trips but no renewals.
type rtCounter struct {
	singles, pipelines, cmds atomic.Int64
}

func isScript(cmd redis.Cmder) bool {
	n := cmd.Name()
	return n == "evalsha" || n == "eval"
}

func (h *rtCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *rtCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.singles.Add(1)
		if isScript(cmd) {
			h.cmds.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *rtCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines.Add(1)
		n := 0
		for _, c := range cmds {
			if isScript(c) {
				n++
			}
		}
		h.cmds.Add(int64(n))
		return next(ctx, cmds)
	}
}

type rtSnap struct{ singles, pipelines, cmds int64 }

func (h *rtCounter) snap() rtSnap {
	return rtSnap{h.singles.Load(), h.pipelines.Load(), h.cmds.Load()}
}

func (a rtSnap) sub(b rtSnap) rtSnap {
	return rtSnap{a.singles - b.singles, a.pipelines - b.pipelines, a.cmds - b.cmds}
}

func (a rtSnap) roundTrips() int64 { return a.singles + a.pipelines }

// evalshaCalls reads cmdstat_evalsha's calls from INFO commandstats of one node.
func evalshaCalls(ctx context.Context, c *redis.Client) (int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		return strconv.ParseInt(n, 10, 64)
	}
	return 0, nil // no EVALSHA yet
}

func evalshaAll(ctx context.Context, cs []*redis.Client) ([]int64, error) {
	out := make([]int64, len(cs))
	for i, c := range cs {
		n, err := evalshaCalls(ctx, c)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// heldResult is one run of scenario held.
type heldResult struct {
	h            int
	held         int           // holding the lock when the window started
	acqTook      time.Duration // until all H held the lock (or gave up, or the cut-off)
	cutOff       bool          // heldAcquireLimit passed before all H had settled
	acqErr       int           // Do returned without calling fn (Acquire failed)
	lost         int
	window       time.Duration // from the end of the acquire phase to the release
	grBefore     int
	grMax, grMed int   // during the hold, minus before
	heap, stack  int64 // during the hold minus before, bytes: medians of the samples
	heapMax      int64
	rt           rtSnap
	evalsha      int64 // server side, all nodes, during the window
	nodes        int
	lastErr      error
}

func (x *heldResult) perNodePerSec(n int64) float64 {
	return float64(n) / float64(x.nodes) / x.window.Seconds()
}

func (x *heldResult) batching() float64 {
	if x.rt.roundTrips() == 0 {
		return 0
	}
	return float64(x.rt.cmds) / float64(x.rt.roundTrips())
}

// runHeld holds h locks with Client.Do at once for hold, on a fresh client whose node
// clients count their round trips.
func (r *runner) runHeld(ctx context.Context, h int, hold, ttl time.Duration) (*heldResult, error) {
	addrs := r.addrs[:5]
	cs := newClients(addrs)
	hooks := make([]*rtCounter, len(cs))
	for i, c := range cs {
		hooks[i] = &rtCounter{}
		c.AddHook(hooks[i])
	}
	o, err := newOursOn(cs)
	if err != nil {
		return nil, err
	}
	defer o.close()
	admin := newClients(addrs)
	defer closeClients(admin)
	// Warm up with parallel cycles, so that the node clients' pools have grown before the
	// baseline is read: the buffers of connections a busy client dials anyway are not a
	// cost of holding locks.
	warm := &contender{impl: o, prefix: "held:warm:"}
	warm.runParallel(ctx, &stats{}, 300*time.Millisecond, 256)

	res := &heldResult{h: h, nodes: len(addrs)}
	pregrow(2 * h)
	quiesce(ctx, 5*time.Second)
	gc()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	res.grBefore = runtime.NumGoroutine()

	release := make(chan struct{})
	settled := make(chan bool, h) // one per goroutine: true when fn starts, false when Do returned without calling it
	var lost atomic.Int64
	var errMu sync.Mutex
	var done sync.WaitGroup
	// Each Do has a context of its own: at the end of the acquire phase those still
	// acquiring are abandoned (state pending → abandoned) and cancelled, without touching the
	// contexts of the holders.
	const (
		pending int32 = iota
		holding
		abandoned
	)
	states := make([]atomic.Int32, h)
	cancels := make([]context.CancelFunc, h)
	start := time.Now()
	for i := range h {
		key := "held:" + strconv.Itoa(h) + ":" + strconv.Itoa(i)
		dctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		done.Go(func() {
			defer cancel()
			called, cut := false, false
			err := o.c.Do(dctx, key, ttl, func(fctx context.Context, _ *redlock.Lock) error {
				if !states[i].CompareAndSwap(pending, holding) {
					return nil // abandoned: the acquire phase ended just before
				}
				called = true
				settled <- true
				select {
				case <-release:
				case <-fctx.Done():
					select {
					case <-release: // the end of the run, not a loss
					default:
						cut = true
					}
				}
				return nil
			})
			if !called {
				settled <- false
			} else if cut || errors.Is(err, redlock.ErrLockLost) {
				lost.Add(1)
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				errMu.Lock()
				res.lastErr = err
				errMu.Unlock()
			}
		})
	}
	finish := func() {
		close(release)
		for _, c := range cancels {
			c()
		}
		done.Wait()
	}
	limit := time.NewTimer(heldAcquireLimit)
	defer limit.Stop()
	for n := 0; n < h; n++ {
		select {
		case ok := <-settled:
			if ok {
				res.held++
			} else {
				res.acqErr++
			}
			continue
		case <-limit.C:
		case <-ctx.Done():
			finish()
			return nil, ctx.Err()
		}
		// Cut off: abandon every Do still acquiring and wait until they have returned, so
		// that the window measures holders only.
		res.cutOff = true
		for i := range states {
			if states[i].CompareAndSwap(pending, abandoned) {
				cancels[i]()
			}
		}
		for ; n < h; n++ {
			if <-settled {
				res.held++
			} else {
				res.acqErr++
			}
		}
	}
	res.acqTook = time.Since(start)

	// The hold window: counters at both ends, goroutines sampled throughout, the heap once.
	w0 := time.Now()
	rt0 := make([]rtSnap, len(hooks))
	for i, k := range hooks {
		rt0[i] = k.snap()
	}
	ev0, err := evalshaAll(ctx, admin)
	if err != nil {
		finish()
		return nil, err
	}
	var grs []int
	var heaps, stacks []int64
	// Heap samples at the middles of eighths of the window: at varying phases of the 1 s
	// renewal period, so that some fall between renewals and some on them.
	heapEvery := hold / heapSamples
	heapAt := w0.Add(heapEvery / 2)
	for end := w0.Add(hold); time.Now().Before(end) && ctx.Err() == nil; {
		grs = append(grs, runtime.NumGoroutine()-res.grBefore)
		if len(heaps) < heapSamples && !time.Now().Before(heapAt) {
			heapAt = heapAt.Add(heapEvery)
			gc()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			heaps = append(heaps, int64(m.HeapAlloc)-int64(m0.HeapAlloc))
			stacks = append(stacks, int64(m.StackInuse)-int64(m0.StackInuse))
		}
		d := min(200*time.Millisecond, time.Until(end))
		if len(heaps) < heapSamples {
			d = min(d, max(time.Millisecond, time.Until(heapAt)))
		}
		sleep(ctx, d)
	}
	ev1, err := evalshaAll(ctx, admin)
	for i, k := range hooks {
		res.rt = addSnap(res.rt, k.snap().sub(rt0[i]))
	}
	res.window = time.Since(w0)
	finish()
	if err != nil {
		return nil, err
	}
	for i := range ev0 {
		res.evalsha += ev1[i] - ev0[i]
	}
	if len(grs) > 0 {
		res.grMax = slices.Max(grs)
		slices.Sort(grs)
		res.grMed = grs[len(grs)/2]
	}
	if len(heaps) > 0 {
		slices.Sort(heaps)
		slices.Sort(stacks)
		res.heap, res.heapMax, res.stack = heaps[len(heaps)/2], heaps[len(heaps)-1], stacks[len(stacks)/2]
	}
	res.lost = int(lost.Load())
	return res, nil
}

func addSnap(a, b rtSnap) rtSnap {
	return rtSnap{a.singles + b.singles, a.pipelines + b.pipelines, a.cmds + b.cmds}
}

// scenarioHeld holds many locks at once with Client.Do and measures what holding costs.
func (r *runner) scenarioHeld(ctx context.Context) error {
	var res []*heldResult
	for _, h := range r.cfg.HeldSizes {
		r.logf("held: %d concurrent Do holding %s, TTL %s", h, r.cfg.HeldHold, heldTTL)
		x, err := r.runHeld(ctx, h, r.cfg.HeldHold, heldTTL)
		if err != nil {
			return err
		}
		res = append(res, x)
	}

	w := r.out
	fmt.Fprintf(w, "## held: H concurrent `Client.Do` holding their locks, TTL %s, 5 healthy nodes (ours only)\n\n", heldTTL)
	fmt.Fprintf(w, "redsync has no `Do` (no renewer of its own: a caller would have to run one per lock with `Extend`), so only ours runs. "+
		"H goroutines each call `Do(ctx, key, %s, fn)` on one shared client with default options (renewal every third of the TTL, so 1 s). "+
		"The acquire phase lasts until every Do holds its lock or gave up, at most %s; then comes the hold window, %s, after which every fn returns and the acquires still retrying are cancelled. "+
		"Lost = Do returned an error matching ErrLockLost, or fn's context ended before the release; not acquired = Do returned without calling fn, or had not called it by the end of the acquire phase. "+
		"The per-lock figures divide by the locks held when the window started (H when all were acquired; the targets want all H held). "+
		"Goroutines = runtime.NumGoroutine() during the window (sampled every 200 ms, the most of the samples; the callers of Do count) minus before the run. "+
		"Heap and stack = runtime.MemStats HeapAlloc and StackInuse after runtime.GC() (twice, to empty the sync.Pools too) minus the same before the run, read %d times during the window (at the middles of its eighths, so at varying phases of the 1 s renewal period); the median, and for the heap the most in brackets "+
		"(after a warm-up of 256 goroutines × 300 ms of TryAcquire+Release on the same client, so that its connection pools have grown, and 2×H goroutines started and ended, so that the runtime's free goroutine descriptors, which are never freed, cover the callers of Do and the library's goroutines whatever ran before; the harness's own per-lock state, a key, a context and a closure, about 0.3 KB, is in the figure). "+
		"Round trips are counted on the client side by a go-redis hook on the node clients (a command sent alone is one round trip, a pipeline is one whatever it carries); "+
		"renewals per round trip = script calls (EVALSHA, EVAL) / round trips during the window, when the only script calls are the renewals. "+
		"EVALSHA/s is the server's own count (INFO commandstats, cmdstat_evalsha) over the window, as a cross-check: H locks renewed every second make H per node.\n\n",
		heldTTL, heldAcquireLimit, r.cfg.HeldHold, heapSamples)
	var rows [][]string
	var ns []string
	var ts []Target
	for _, x := range res {
		n := float64(x.held)
		took := ms(x.acqTook)
		if x.cutOff {
			took = "cut off at " + took
		}
		rows = append(rows, []string{fmt.Sprint(x.h), took, fmt.Sprint(x.held), fmt.Sprint(x.acqErr), fmt.Sprint(x.lost),
			fmt.Sprintf("%.2f (max %d, median %d)", float64(x.grMax)/n, x.grMax, x.grMed),
			fmt.Sprintf("%s (%s)", kb(float64(x.heap)/n), kb(float64(x.heapMax)/n)), kb(float64(x.stack) / n),
			rate(x.perNodePerSec(x.rt.cmds)), rate(x.perNodePerSec(x.evalsha)), rate(x.perNodePerSec(x.rt.roundTrips())),
			fmt.Sprintf("%.2f", x.batching()), ms(x.window)})
		if x.lastErr != nil {
			msg := x.lastErr.Error()
			if len(msg) > 240 {
				msg = msg[:240] + "…"
			}
			ns = append(ns, fmt.Sprintf("H=%d, last error: `%s`", x.h, strings.ReplaceAll(msg, "`", "'")))
		}
		lostT := Target{Scenario: "held", Name: fmt.Sprintf("H=%d: locks lost (and none left unacquired)", x.h), Want: "0", Got: fmt.Sprint(x.lost), Pass: x.lost == 0 && x.acqErr == 0}
		if x.acqErr > 0 {
			lostT.Got += fmt.Sprintf("; %d not acquired", x.acqErr)
		}
		heapPer := float64(x.heap) / n
		ts = append(ts, lostT,
			Target{Scenario: "held", Name: fmt.Sprintf("H=%d: goroutines during the hold − before", x.h), Want: fmt.Sprintf("≤ 1.0×H + %d", heldGoroutineSlack),
				Got: fmt.Sprintf("%d for %d held (%.2f per lock)", x.grMax, x.held, float64(x.grMax)/n), Pass: x.held == x.h && x.grMax <= x.held+heldGoroutineSlack},
			Target{Scenario: "held", Name: fmt.Sprintf("H=%d: heap per held lock (median of the readings)", x.h), Want: "≤ " + kb(heldHeapPerLock),
				Got: kb(heapPer), Pass: x.held == x.h && heapPer <= heldHeapPerLock},
			Target{Scenario: "held", Name: fmt.Sprintf("H=%d: renewals per round trip", x.h), Want: fmt.Sprintf("≥ %d", heldBatching),
				Got: fmt.Sprintf("%.2f", x.batching()), Pass: x.held == x.h && x.batching() >= heldBatching},
		)
		if x.held < x.h {
			for i := len(ts) - 3; i < len(ts); i++ {
				ts[i].Got += fmt.Sprintf("; only %d of %d held", x.held, x.h)
			}
		}
	}
	table(w, []string{"H", "acquire phase", "held in window", "not acquired", "locks lost", "goroutines per lock", "heap per lock", "stack per lock",
		"renewals/s per node (client)", "EVALSHA/s per node (server)", "round trips/s per node", "renewals per round trip", "window"}, rows)
	notes(w, ns)
	targetTable(w, ts)
	r.add(ts...)
	return nil
}

// pregrow starts n goroutines and lets them end, so that the runtime has n goroutine
// descriptors on its free list before the baseline is read. Descriptors are never freed:
// without this the heap reading would count those of the callers of Do and of the library's
// goroutines (about 0.4 KB each) when the process had never had so many goroutines, and
// not when an earlier scenario had. held uses 2×H: twice what the goroutine target allows,
// so that a library within it has all its descriptors counted in neither reading (the
// goroutine count prices them).
func pregrow(n int) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() { <-start })
	}
	close(start)
	wg.Wait()
}

// gc collects twice: the second also empties what sync.Pools kept through the first (their
// victim caches), so that two readings of HeapAlloc compare live objects only.
func gc() {
	runtime.GC()
	runtime.GC()
}

// kb formats a byte count in KB (1024).
func kb(b float64) string {
	if b < 1024 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.2f KB", b/1024)
}
