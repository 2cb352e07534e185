package otel_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	rlotel "github.com/quorumlock/redlock/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkAcquireRelease prices the observer: one TryAcquire and one Release on three
// in-process nodes, without an observer, with BaseObserver (the calls, doing nothing), and
// with this package's Observer on SDK providers that record every span and metric (a
// manual reader, never collected; spans sampled and dropped). Compare allocs/op and ns/op
// of the three in one run.
func BenchmarkAcquireRelease(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	full, err := rlotel.New(rlotel.WithMeterProvider(mp), rlotel.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts []redlock.Option
	}{
		{"none", nil},
		{"base", []redlock.Option{redlock.WithObserver(redlock.BaseObserver{})}},
		{"otel", []redlock.Option{redlock.WithObserver(full)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			_, clients := nodes(b, 3)
			c, err := redlock.New(clients, bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				l, err := c.TryAcquire(ctx, "bench", 10*time.Second)
				if err != nil {
					b.Fatal(i, err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
