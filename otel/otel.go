// Package otel reports what a redlock Client does as OpenTelemetry metrics and traces. It
// implements [redlock.Observer]; give it to the Client with [redlock.WithObserver]:
//
//	obs, err := otel.New() // the global MeterProvider and TracerProvider
//	if err != nil { ... }
//	c, err := redlock.New(nodes, redlock.WithObserver(obs))
//
// The metrics and their attributes are listed in docs/operations.md ("Metrics"). Keys are
// not attributes unless [WithKeyAttribute] is given: their number is unbounded, and every
// distinct attribute value makes a new time series.
//
// Spans: one per Acquire (TryAcquire, and the Multi forms), Extend, Release and Do, named
// redlock.acquire, redlock.extend, redlock.release and redlock.do, with the acquire of a Do
// and the renewals of its lock as children of the Do's span. Each attempt and each node
// call is an event on its operation's span (an event rather than a child span: a single
// acquire on five nodes would otherwise make six spans); a node that answers after its
// operation returned is counted in the metrics, but its span has ended by then. The fencing
// token is the span attribute redlock.token.
package otel

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/quorumlock/redlock/otel"

// Attribute keys. The db.* and server.* keys are those of the OpenTelemetry semantic
// conventions for database client calls; the redlock.* keys are ours.
const (
	AttrOperation = attribute.Key("redlock.operation") // acquire, extend, release, do; node calls also raise, undo, heal
	AttrOutcome   = attribute.Key("redlock.outcome")   // ok, refused, expired, canceled, error, timeout, not_sent
	AttrPath      = attribute.Key("redlock.path")      // fast or raised (attempts)
	AttrNode      = attribute.Key("redlock.node")      // the node's index in New's slice
	AttrToken     = attribute.Key("redlock.token")     // span attribute: the fencing token
	AttrKeys      = attribute.Key("redlock.keys")      // span attribute: the number of keys
	AttrKey       = attribute.Key("redlock.key")       // only WithKeyAttribute: the first key
	AttrSemaphore = attribute.Key("redlock.semaphore") // only WithKeyAttribute: a semaphore's name (Op.Semaphore)
	AttrElection  = attribute.Key("redlock.election")  // only WithKeyAttribute: an election's name (Op.Election)
	AttrRWLock    = attribute.Key("redlock.rwlock")    // only WithKeyAttribute: a read/write lock's name (Op.RWLock)
	AttrTTL       = attribute.Key("redlock.ttl_ms")    // span attribute
	AttrAttempts  = attribute.Key("redlock.attempts")  // span attribute
	AttrJoined    = attribute.Key("redlock.joined")    // span attribute: a reentrant join

	attrDBSystem      = attribute.Key("db.system.name")
	attrDBOperation   = attribute.Key("db.operation.name")
	attrServerAddress = attribute.Key("server.address")
	attrServerPort    = attribute.Key("server.port")
	attrErrorType     = attribute.Key("error.type")
)

// Option configures [New].
type Option func(*config)

type config struct {
	meters  metric.MeterProvider
	tracers trace.TracerProvider
	keyAttr bool
}

// WithMeterProvider sets the MeterProvider. Default: otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.meters = mp } }

// WithTracerProvider sets the TracerProvider. Default: otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tracers = tp } }

// WithKeyAttribute adds the lock's first key to spans as redlock.key (never to metrics).
// Keys may be user data (an account or order id): turn it on only where traces may hold it.
func WithKeyAttribute() Option { return func(c *config) { c.keyAttr = true } }

// Observer is a [redlock.Observer] that records OpenTelemetry metrics and spans. It is safe
// for concurrent use; one Observer may serve several Clients.
type Observer struct {
	redlock.BaseObserver
	tracer  trace.Tracer
	keyAttr bool

	acquireDur  metric.Float64Histogram
	acquireTry  metric.Int64Histogram
	holdDur     metric.Float64Histogram
	nodeDur     metric.Float64Histogram
	operations  metric.Int64Counter
	attempts    metric.Int64Counter
	nodeErrors  metric.Int64Counter
	lost        metric.Int64Counter
	renewFailed metric.Int64Counter
	wakeups     metric.Int64Counter
}

// Buckets of the duration histograms, in seconds: node calls take about a millisecond on
// a LAN and time out at the node timeout (100 ms by default); acquires that wait for a
// holder take up to the TTL; holds last seconds to hours.
var (
	nodeBuckets    = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
	acquireBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	holdBuckets    = []float64{0.01, 0.1, 1, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600}
)

// New returns an Observer with the instruments of docs/operations.md registered on the
// MeterProvider. It fails only when the provider refuses an instrument.
func New(opts ...Option) (*Observer, error) {
	cfg := config{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.meters == nil {
		cfg.meters = otel.GetMeterProvider()
	}
	if cfg.tracers == nil {
		cfg.tracers = otel.GetTracerProvider()
	}
	m := cfg.meters.Meter(ScopeName)
	o := &Observer{tracer: cfg.tracers.Tracer(ScopeName), keyAttr: cfg.keyAttr}
	var errs []error
	hist := func(name, desc string, b []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(b...))
		errs = append(errs, err)
		return h
	}
	count := func(name, desc, unit string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	o.acquireDur = hist("redlock.acquire.duration", "Time an acquire call took until it returned, waiting and retries included.", acquireBuckets)
	o.holdDur = hist("redlock.hold.duration", "Time a lock was held, from the acquire's return to the release.", holdBuckets)
	o.nodeDur = hist("db.client.operation.duration", "Duration of one command to one Redis node, from the write of its pipeline to its answer or timeout.", nodeBuckets)
	var err error
	o.acquireTry, err = m.Int64Histogram("redlock.acquire.attempts", metric.WithDescription("Attempts one acquire call made."),
		metric.WithUnit("{attempt}"), metric.WithExplicitBucketBoundaries(1, 2, 3, 5, 10, 20, 50, 100))
	errs = append(errs, err)
	o.operations = count("redlock.operations", "Operations (acquire, extend, release, do) by outcome.", "{operation}")
	o.attempts = count("redlock.acquire.attempt.count", "Acquire attempts by outcome and path (fast: one round trip; raised: fence counters raised).", "{attempt}")
	o.nodeErrors = count("redlock.node.errors", "Node calls that failed: an error, no answer within the node timeout, or not sent.", "{error}")
	o.lost = count("redlock.lock.lost", "Locks that Do could not keep: its function's context was cancelled.", "{lock}")
	o.renewFailed = count("redlock.renewal.failures", "Renewals of a Do's lock that failed (they are retried while validity is left).", "{renewal}")
	o.wakeups = count("redlock.wakeups", "Waiting acquires woken by a release instead of their retry pause.", "{wakeup}")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

// Start begins a span for the operation and returns the function that ends it and records
// the operation's metrics.
func (o *Observer) Start(ctx context.Context, op redlock.Op) (context.Context, func(redlock.End)) {
	attrs := []attribute.KeyValue{AttrOperation.String(string(op.Kind)), AttrKeys.Int(len(op.Keys))}
	if op.TTL > 0 {
		attrs = append(attrs, AttrTTL.Int64(op.TTL.Milliseconds()))
	}
	if o.keyAttr && len(op.Keys) > 0 {
		attrs = append(attrs, AttrKey.String(op.Keys[0]))
	}
	if o.keyAttr && op.Semaphore != "" {
		attrs = append(attrs, AttrSemaphore.String(op.Semaphore))
	}
	if o.keyAttr && op.Election != "" {
		attrs = append(attrs, AttrElection.String(op.Election))
	}
	if o.keyAttr && op.RWLock != "" {
		attrs = append(attrs, AttrRWLock.String(op.RWLock))
	}
	ctx, span := o.tracer.Start(ctx, "redlock."+string(op.Kind), trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindClient))
	start := time.Now()
	return ctx, func(e redlock.End) {
		out := AttrOutcome.String(string(e.Outcome))
		set := metric.WithAttributeSet(attribute.NewSet(AttrOperation.String(string(op.Kind)), out))
		o.operations.Add(ctx, 1, set)
		if op.Kind == redlock.OpAcquire {
			oset := metric.WithAttributeSet(attribute.NewSet(out))
			o.acquireDur.Record(ctx, time.Since(start).Seconds(), oset)
			if !e.Joined {
				o.acquireTry.Record(ctx, int64(e.Attempts), oset)
			}
		}
		span.SetAttributes(out)
		if e.Attempts > 0 {
			span.SetAttributes(AttrAttempts.Int(e.Attempts))
		}
		if e.Joined {
			span.SetAttributes(AttrJoined.Bool(true))
		}
		if e.Token != 0 {
			span.SetAttributes(AttrToken.Int64(int64(e.Token)))
		}
		if e.Err != nil {
			span.RecordError(e.Err)
			span.SetStatus(codes.Error, string(e.Outcome))
		}
		span.End()
	}
}

// Attempt records one acquire attempt, as a counter and as an event of the acquire's span.
func (o *Observer) Attempt(ctx context.Context, a redlock.Attempt) {
	path := "fast"
	if a.Raised {
		path = "raised"
	}
	attrs := attribute.NewSet(AttrOutcome.String(string(a.Outcome)), AttrPath.String(path))
	o.attempts.Add(ctx, 1, metric.WithAttributeSet(attrs))
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("redlock.attempt", trace.WithAttributes(AttrOutcome.String(string(a.Outcome)), AttrPath.String(path),
			attribute.Int("redlock.agreed", a.Agreed), attribute.Float64("redlock.duration_ms", float64(a.Duration)/1e6)))
	}
}

// NodeCall records one node call: its duration, its error if any, and an event of the
// operation's span.
func (o *Observer) NodeCall(ctx context.Context, n redlock.NodeCall) {
	attrs := []attribute.KeyValue{attrDBSystem.String("redis"), attrDBOperation.String(n.Command),
		AttrNode.Int(n.Node), AttrOperation.String(string(n.Op)), AttrOutcome.String(string(n.Outcome))}
	if host, port, err := net.SplitHostPort(n.Addr); err == nil {
		attrs = append(attrs, attrServerAddress.String(host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attrServerPort.Int(p))
		}
	}
	et := errorType(n)
	if et != "" {
		attrs = append(attrs, attrErrorType.String(et))
	}
	set := metric.WithAttributeSet(attribute.NewSet(attrs...))
	if n.Outcome != redlock.OutcomeNotSent {
		o.nodeDur.Record(ctx, n.Duration.Seconds(), set)
	}
	if et != "" {
		o.nodeErrors.Add(ctx, 1, set)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("redlock.node_call", trace.WithAttributes(append(attrs, attribute.Float64("redlock.duration_ms", float64(n.Duration)/1e6))...))
	}
}

// Event records a lost lock, a failed renewal, a hold's end or a wake-up.
func (o *Observer) Event(ctx context.Context, e redlock.Event) {
	switch e.Kind {
	case redlock.EventLockLost:
		o.lost.Add(ctx, 1)
	case redlock.EventRenewalFailed:
		o.renewFailed.Add(ctx, 1)
	case redlock.EventHoldEnded:
		o.holdDur.Record(ctx, e.Duration.Seconds())
	case redlock.EventWakeUp:
		o.wakeups.Add(ctx, 1)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		attrs := []attribute.KeyValue{}
		if e.Err != nil {
			attrs = append(attrs, attribute.String("exception.message", e.Err.Error()))
		}
		span.AddEvent("redlock."+string(e.Kind), trace.WithAttributes(attrs...))
	}
}

// errorType is the error.type of a failed node call, "" for one that did not fail (agreed
// or refused: a refusal is an answer). Low-cardinality values only.
func errorType(n redlock.NodeCall) string {
	switch n.Outcome {
	case redlock.OutcomeTimeout:
		return "timeout"
	case redlock.OutcomeNotSent:
		return "not_sent"
	case redlock.OutcomeError:
	default:
		return ""
	}
	var rerr redis.Error
	var nerr net.Error
	switch {
	case errors.As(n.Err, &rerr):
		return "redis_error" // an error reply: NOPERM, OOM, BUSY, …
	case errors.As(n.Err, &nerr):
		return "network"
	}
	return "_OTHER"
}
