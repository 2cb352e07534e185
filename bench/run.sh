#!/usr/bin/env bash
# Side-by-side benchmark of quorumlock/redlock and go-redsync/redsync: the single-caller,
# contended, node-count and fault scenarios a–h, the load scenarios f0, p, burst, held, ramp,
# starve and hung, and the multi-process scenarios procs and procsd.
#
# Builds bench/cmd/sidebyside and runs it. The program starts its own redis-server nodes on
# free loopback ports (no persistence), runs every scenario for both libraries interleaved,
# stops the nodes by PID and prints markdown tables on stdout (progress on stderr).
# Arguments are passed to the program, e.g.:
#
#   bench/run.sh                         # everything, about nine minutes
#   bench/run.sh -scenarios a,e -dur 10s # only some scenarios
#   bench/run.sh -scenarios f0,p,burst,held,ramp,hung   # the load scenarios, 3–5 minutes
#   bench/run.sh -scenarios procs        # 8, 32 and 64 processes on one key, about 2 minutes
#   bench/run.sh -scenarios procs -procs-n 8   # 8 processes only, about 30 s
#   bench/run.sh -h                      # all flags
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v redis-server >/dev/null 2>&1; then
  echo "run.sh: redis-server is not on PATH; the benchmark needs it (Debian: apt-get install -y redis-server)" >&2
  exit 2
fi
if ! command -v go >/dev/null 2>&1; then
  echo "run.sh: go is not on PATH" >&2
  exit 2
fi

bin=$(mktemp -d "${TMPDIR:-/tmp}/sidebyside.XXXXXX")
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/sidebyside" ./cmd/sidebyside
"$bin/sidebyside" "$@"
