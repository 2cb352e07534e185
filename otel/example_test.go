package otel_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/quorumlock/redlock"
	rlotel "github.com/quorumlock/redlock/otel"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// The lock's metrics served for Prometheus on a loopback port through the OpenTelemetry
// Prometheus exporter, then scraped with a plain HTTP GET and parsed, as Prometheus would.
func Example_prometheus() {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		panic(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	obs, err := rlotel.New(rlotel.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	// Three in-process Redis nodes, one lock acquired and released.
	var clients []redis.UniversalClient
	for range 3 {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			panic(err)
		}
		defer m.Close()
		rc := redis.NewClient(&redis.Options{Addr: m.Addr()})
		defer rc.Close()
		clients = append(clients, rc)
	}
	c, err := redlock.New(clients, redlock.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	l, err := c.Acquire(ctx, "settlement:2026-12-01", 10*time.Second)
	if err != nil {
		panic(err)
	}
	if err := l.Release(ctx); err != nil {
		panic(err)
	}
	c.Close()

	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		panic(err)
	}
	var names []string
	for name := range families {
		if strings.HasPrefix(name, "redlock_") || strings.HasPrefix(name, "db_client") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Println(name)
	}
	for _, m := range families["redlock_operations_total"].GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		fmt.Printf("operations %s %s: %v\n", labels["redlock_operation"], labels["redlock_outcome"], m.GetCounter().GetValue())
	}
	// Unordered output:
	// db_client_operation_duration_seconds
	// redlock_acquire_attempt_count_total
	// redlock_acquire_attempts
	// redlock_acquire_duration_seconds
	// redlock_hold_duration_seconds
	// redlock_operations_total
	// operations acquire ok: 1
	// operations release ok: 1
}
