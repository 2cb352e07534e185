# Everyday commands (`make` alone lists them). CI runs .ci/run, which installs what the tests need and runs lint and race.
.PHONY: help test race lint bench lab compare demo ci

help: ## this list: every target and what it does (the default)
	@awk -F ':.*## ' '/^[a-z][a-z-]*:.*## / { printf "  %-6s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

test: ## the fast tests, without the race detector
	go test ./...
	cd otel && go test ./...
	cd compare && go test ./...

race: ## the README's test command, and the otel module
	go test -race ./...
	cd otel && go test -race ./...
	cd compare && go test -race ./...

lint: ## vet and staticcheck on every module
	go vet ./...
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd bench && go vet ./... && go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd otel && go vet ./... && go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd compare && go vet ./... && go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

bench: ## benchmarks on real nodes, then the side-by-side run against go-redsync
	go test -run '^$$' -bench . -benchmem .
	bench/run.sh

lab: ## the chaos lab, every scenario, report in /tmp/lab
	go run ./cmd/redlock lab --out /tmp/lab

compare: ## the comparison lab, every backend and fault (docs/choosing.md), report in /tmp/compare.html
	cd compare && go run ./cmd/redlock-compare -profile full -html /tmp/compare.html

demo: ## the settlement story on embedded nodes
	go run ./cmd/redlock demo

ci: ## what CI runs
	bash .ci/run
