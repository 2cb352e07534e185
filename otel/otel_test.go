package otel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/quorumlock/redlock"
	rlotel "github.com/quorumlock/redlock/otel"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// nodes starts n miniredis servers and a go-redis client for each.
func nodes(t testing.TB, n int) ([]*miniredis.Miniredis, []redis.UniversalClient) {
	var servers []*miniredis.Miniredis
	var clients []redis.UniversalClient
	for range n {
		m := miniredis.RunT(t)
		rc := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
		t.Cleanup(func() { rc.Close() })
		servers, clients = append(servers, m), append(clients, rc)
	}
	return servers, clients
}

// TestMetricsAndSpans checks the figures of a known workload: three acquires that succeed
// (one of them by a Do), one that meets a held key, and the Do's lock lost while it runs
// (its keys deleted on every node, so the renewal finds them gone).
func TestMetricsAndSpans(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	obs, err := rlotel.New(rlotel.WithMeterProvider(mp), rlotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	servers, clients := nodes(t, 3)
	a, err := redlock.New(clients, redlock.WithObserver(obs), redlock.WithRenewFraction(0.1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := redlock.New(clients, redlock.WithObserver(obs), redlock.WithRetryLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	l1, err := a.TryAcquire(ctx, "k1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := a.Acquire(ctx, "k2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, "k2", time.Minute); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("contended acquire: %v", err)
	}
	var doToken redlock.Token
	err = a.Do(ctx, "k3", time.Second, func(ctx context.Context, l *redlock.Lock) error {
		doToken = l.Token()
		for _, s := range servers {
			s.Del("k3")
		}
		<-ctx.Done() // the renewal finds the keys gone and cancels
		return nil
	})
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do: %v", err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a.Close() // waits for the calls still answering in the background
	b.Close()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	ops := sums(t, rm, "redlock.operations", "redlock.operation", "redlock.outcome")
	for k, want := range map[string]int64{"acquire/ok": 3, "acquire/refused": 1, "do/lost": 1, "release/ok": 2} {
		if ops[k] != want {
			t.Errorf("redlock.operations %s = %d, want %d (all: %v)", k, ops[k], want, ops)
		}
	}
	if got := sums(t, rm, "redlock.lock.lost")[""]; got != 1 {
		t.Errorf("redlock.lock.lost = %d, want 1", got)
	}
	att := sums(t, rm, "redlock.acquire.attempt.count", "redlock.outcome", "redlock.path")
	if att["ok/fast"] != 3 || att["refused/fast"] != 1 {
		t.Errorf("attempts %v, want 3 ok/fast and 1 refused/fast", att)
	}
	if n, sum := histogram(t, rm, "redlock.acquire.attempts"); n != 4 || sum != 4 {
		t.Errorf("redlock.acquire.attempts: %d recorded, sum %v; want 4 acquire calls of 1 attempt each", n, sum)
	}
	if n, _ := histogram(t, rm, "redlock.acquire.duration"); n != 4 {
		t.Errorf("redlock.acquire.duration: %d recorded, want 4", n)
	}
	if n, _ := histogram(t, rm, "redlock.hold.duration"); n != 2 {
		t.Errorf("redlock.hold.duration: %d recorded, want 2 (k1, k2; the lost k3 was not released)", n)
	}
	// Node calls of the acquires: 4 acquires × 3 nodes, 3 of them refused.
	nc := histogramCounts(t, rm, "db.client.operation.duration", "redlock.operation", "redlock.outcome", "db.system.name", "db.operation.name")
	if nc["acquire/ok/redis/EVALSHA"] != 9 || nc["acquire/refused/redis/EVALSHA"] != 3 {
		t.Errorf("node calls %v, want 9 acquire/ok and 3 acquire/refused, EVALSHA on redis", nc)
	}

	// Spans: one per operation, the Do's acquire under the Do's span, tokens as attributes.
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	if len(byName["redlock.acquire"]) != 4 || len(byName["redlock.do"]) != 1 || len(byName["redlock.release"]) < 2 {
		t.Fatalf("spans: %d acquire, %d do, %d release", len(byName["redlock.acquire"]), len(byName["redlock.do"]), len(byName["redlock.release"]))
	}
	do := byName["redlock.do"][0]
	var doAcquire sdktrace.ReadOnlySpan
	for _, s := range byName["redlock.acquire"] {
		if s.Parent().SpanID() == do.SpanContext().SpanID() {
			doAcquire = s
		}
		events := 0
		for _, e := range s.Events() {
			if e.Name == "redlock.node_call" {
				events++
			}
		}
		// The quorum's answers come before the span ends; the last node's may come after,
		// when it is counted in the metrics only.
		if events < 2 || events > 3 {
			t.Errorf("acquire span with %d node_call events, want 2 or 3", events)
		}
	}
	if doAcquire == nil {
		t.Fatal("the Do's acquire is not a child of the Do's span")
	}
	if got := attr(doAcquire, "redlock.token"); got.AsInt64() != int64(doToken) {
		t.Errorf("redlock.token %v, want %d", got, doToken)
	}
	if attr(do, "redlock.outcome").AsString() != "lost" {
		t.Errorf("do span outcome %v", attr(do, "redlock.outcome"))
	}
	renewals := 0
	for _, s := range byName["redlock.extend"] {
		if s.Parent().SpanID() == do.SpanContext().SpanID() {
			renewals++
		}
	}
	if renewals == 0 {
		t.Error("no renewal span under the Do's span")
	}
	for _, s := range spans.Ended() {
		if attr(s, "redlock.key").Type() != attribute.EMPTY {
			t.Errorf("span %s carries the key without WithKeyAttribute", s.Name())
		}
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func find(t *testing.T, rm metricdata.ResourceMetrics, name string) metricdata.Aggregation {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m.Data
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

// label joins the values of keys in set with "/".
func label(set attribute.Set, keys []string) string {
	out := ""
	for i, k := range keys {
		v, _ := set.Value(attribute.Key(k))
		if i > 0 {
			out += "/"
		}
		out += v.String()
	}
	return out
}

func sums(t *testing.T, rm metricdata.ResourceMetrics, name string, keys ...string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, dp := range find(t, rm, name).(metricdata.Sum[int64]).DataPoints {
		out[label(dp.Attributes, keys)] += dp.Value
	}
	return out
}

func histogramCounts(t *testing.T, rm metricdata.ResourceMetrics, name string, keys ...string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, dp := range find(t, rm, name).(metricdata.Histogram[float64]).DataPoints {
		out[label(dp.Attributes, keys)] += dp.Count
	}
	return out
}

// histogram returns the total count and sum of a histogram over all attribute sets.
func histogram(t *testing.T, rm metricdata.ResourceMetrics, name string) (uint64, float64) {
	t.Helper()
	var n uint64
	var sum float64
	switch h := find(t, rm, name).(type) {
	case metricdata.Histogram[float64]:
		for _, dp := range h.DataPoints {
			n, sum = n+dp.Count, sum+dp.Sum
		}
	case metricdata.Histogram[int64]:
		for _, dp := range h.DataPoints {
			n, sum = n+dp.Count, sum+float64(dp.Sum)
		}
	}
	return n, sum
}

// TestWakeUpsAndHoldTime: a waiter woken by a release is counted, and so is the hold.
func TestWakeUpsAndHoldTime(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs, err := rlotel.New(rlotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	_, clients := nodes(t, 3)
	c, err := redlock.New(clients, redlock.WithObserver(obs), redlock.WithRetryDelay(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	held, err := c.Acquire(ctx, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, "w", time.Minute) // waits; the release wakes it long before its 10 s pause
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	// Wait until the waiter is queued and subscribed: after its first attempt (refused) it
	// joins the queue and subscribes to the key's channel, and once the subscription is
	// active it tries once more (the catch-up attempt, refused too). Releasing after only the
	// first refusal could come before the waiter is queued; the waiter would then get the lock
	// through its catch-up attempt, which is not a wake-up (flaked in CI).
	for {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		if sums(t, rm, "redlock.acquire.attempt.count", "redlock.outcome")["refused"] >= 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the waiter made no attempt")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	c.Close()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	if n := sums(t, rm, "redlock.wakeups")[""]; n != 1 {
		t.Errorf("redlock.wakeups = %d, want 1: one waiter, one release", n)
	}
	if n, _ := histogram(t, rm, "redlock.hold.duration"); n != 2 {
		t.Errorf("redlock.hold.duration: %d holds, want 2", n)
	}
}

// TestSemaphoreSpans: a semaphore's acquire and Do are spans like a lock's, with the permit's
// token; the semaphore's name is an attribute only with WithKeyAttribute.
func TestSemaphoreSpans(t *testing.T) {
	for _, withKey := range []bool{false, true} {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		opts := []rlotel.Option{rlotel.WithTracerProvider(tp)}
		if withKey {
			opts = append(opts, rlotel.WithKeyAttribute())
		}
		obs, err := rlotel.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, clients := nodes(t, 3)
		c, err := redlock.New(clients, redlock.WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		s := c.Semaphore("bank-api", 4)
		var token redlock.Token
		err = s.Do(ctx, time.Second, func(_ context.Context, p *redlock.Lock) error {
			token = p.Token()
			return nil
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		var acquire, do sdktrace.ReadOnlySpan
		for _, sp := range spans.Ended() {
			switch sp.Name() {
			case "redlock.acquire":
				acquire = sp
			case "redlock.do":
				do = sp
			}
		}
		if acquire == nil || do == nil {
			t.Fatalf("spans: acquire %v, do %v", acquire, do)
		}
		if got := attr(acquire, "redlock.token"); got.AsInt64() != int64(token) {
			t.Errorf("acquire span token %v, want %d", got, token)
		}
		if got := attr(acquire, "redlock.keys").AsInt64(); got != 4 {
			t.Errorf("acquire span redlock.keys %d, want the 4 permit keys", got)
		}
		for _, sp := range []sdktrace.ReadOnlySpan{acquire, do} {
			got := attr(sp, "redlock.semaphore")
			switch {
			case withKey && got.AsString() != "bank-api":
				t.Errorf("%s: redlock.semaphore %v, want bank-api", sp.Name(), got)
			case !withKey && got.Type() != attribute.EMPTY:
				t.Errorf("%s: redlock.semaphore %v without WithKeyAttribute", sp.Name(), got)
			}
		}
	}
}

// TestElectionSpans: an election's Do and Campaign are spans with the election's name under
// WithKeyAttribute, and the term as the acquire's token.
func TestElectionSpans(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	obs, err := rlotel.New(rlotel.WithTracerProvider(tp), rlotel.WithKeyAttribute())
	if err != nil {
		t.Fatal(err)
	}
	_, clients := nodes(t, 3)
	c, err := redlock.New(clients, redlock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var term redlock.Token
	err = c.Election("scheduler").Do(ctx, "host-a", time.Second, func(_ context.Context, l *redlock.Leadership) error {
		term = l.Term()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sp := range spans.Ended() {
		if attr(sp, "redlock.election").AsString() != "scheduler" {
			continue
		}
		seen[sp.Name()] = true
		if sp.Name() == "redlock.acquire" && attr(sp, "redlock.token").AsInt64() != int64(term) {
			t.Errorf("acquire span token %v, want the term %d", attr(sp, "redlock.token"), term)
		}
	}
	if !seen["redlock.do"] || !seen["redlock.acquire"] {
		t.Errorf("spans with redlock.election: %v, want redlock.do and redlock.acquire", seen)
	}
}

// TestRWLockSpans: a read/write lock's acquires carry its name under WithKeyAttribute.
func TestRWLockSpans(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	obs, err := rlotel.New(rlotel.WithTracerProvider(tp), rlotel.WithKeyAttribute())
	if err != nil {
		t.Fatal(err)
	}
	_, clients := nodes(t, 3)
	c, err := redlock.New(clients, redlock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rw := c.RWLock("ledger")
	for _, do := range []func(context.Context, time.Duration, func(context.Context, *redlock.Lock) error) error{rw.DoRead, rw.DoWrite} {
		if err := do(ctx, time.Second, func(context.Context, *redlock.Lock) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sp := range spans.Ended() {
		if sp.Name() == "redlock.acquire" && attr(sp, "redlock.rwlock").AsString() == "ledger" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d acquire spans with redlock.rwlock, want 2 (a read, a write)", n)
	}
}
