#!/usr/bin/env bash
# Explorer throughput: schedules per second for a scenario with three held requests and a logout
# (Benchmarks/explore-three-holds-and-logout.json: 720 orders, all feasible), release build.
# Usage: Benchmarks/explore-throughput.sh [RUNS]   (default 3 runs)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-3}"
swift build -c release --product contract-harness >&2
BIN="$(swift build -c release --show-bin-path)/contract-harness"
for _ in $(seq 1 "$RUNS"); do
    "$BIN" explore Benchmarks/explore-three-holds-and-logout.json --out /tmp/explore-bench-schedule.json | sed -n 2p
done
