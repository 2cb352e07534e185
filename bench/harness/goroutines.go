package harness

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"
)

// goroutines counts the goroutines of the process, leaving out those of the in-process
// fault proxies (four per proxied connection), which belong to the harness and not to the
// library under test.
func goroutines() int {
	var recs []runtime.StackRecord
	for {
		n, ok := runtime.GoroutineProfile(recs)
		if ok {
			recs = recs[:n]
			break
		}
		recs = make([]runtime.StackRecord, n+n/4+16)
	}
	count := 0
	for i := range recs {
		if !isProxy(recs[i].Stack()) {
			count++
		}
	}
	return count
}

var proxyFuncs = map[uintptr]bool{} // entry PC → belongs to faultproxy; only used from goroutines()

func isProxy(stack []uintptr) bool {
	for _, pc := range stack {
		f := runtime.FuncForPC(pc - 1)
		if f == nil {
			continue
		}
		entry := f.Entry()
		p, seen := proxyFuncs[entry]
		if !seen {
			p = strings.Contains(f.Name(), "/internal/faultproxy.")
			proxyFuncs[entry] = p
		}
		if p {
			return true
		}
	}
	return false
}

// drain waits until the goroutine count is back to at most target, polling every 100 ms,
// and returns how long that took and the last count. ok is false if limit passed first.
func drain(ctx context.Context, target int, limit time.Duration) (took time.Duration, last int, ok bool) {
	start := time.Now()
	for {
		last = goroutines()
		took = time.Since(start)
		if last <= target {
			return took, last, true
		}
		if took >= limit || ctx.Err() != nil {
			return took, last, false
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// goroutineSummary groups the goroutines (the fault proxies' left out) by the innermost
// frame of a module outside the standard library, plus the frame of the library or
// harness that started the call, for the -debug-goroutines flag.
func goroutineSummary() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	counts := map[string]int{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "/internal/faultproxy.") {
			continue
		}
		var inner, owner string
		lines := strings.Split(g, "\n")
		for i := 1; i < len(lines); i += 2 {
			f := lines[i]
			if j := strings.LastIndex(f, "("); j > 0 {
				f = f[:j]
			}
			if !strings.Contains(f, ".com/") {
				continue
			}
			if inner == "" {
				inner = f
			}
			if strings.Contains(f, "quorumlock/redlock.") || strings.Contains(f, "redsync/v4.") || strings.Contains(f, "/harness.") {
				owner = f
				break
			}
		}
		if inner == "" {
			inner = "(standard library only)"
		}
		key := inner
		if owner != "" && owner != inner {
			key += " ← " + owner
		}
		counts[key]++
	}
	type kv struct {
		k string
		n int
	}
	var kvs []kv
	for k, n := range counts {
		kvs = append(kvs, kv{k, n})
	}
	slices.SortFunc(kvs, func(a, b kv) int { return b.n - a.n })
	var sb strings.Builder
	for _, e := range kvs {
		fmt.Fprintf(&sb, "  %5d %s\n", e.n, e.k)
	}
	return sb.String()
}
