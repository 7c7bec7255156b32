#!/usr/bin/env bash
# Issue 15 section 3 ("Faster"): the four figures in one command, release build.
#   1. explorer throughput: `explore Benchmarks/explore-three-holds-and-logout.json --exhaustive`
#      (720 orders), schedules/s (target >= 2,000), CPU per schedule, and the floors under it:
#      `experimently-bench session-floor` (a fresh URLSession and 4 echo requests, no SDK or mock)
#      and `experimently-bench sdk-floor` (the SDK's own work of a schedule, no mock or runner);
#   2. in-process round trip (URLSession -> URLProtocol -> mock -> back) against a bare echo
#      URLProtocol in the same run: the ratio (target <= 1.2x);
#   3. `BackendModel.respond` alone, median per flag GET (target < 3 us);
#   4. the whole mutant matrix (`contract-harness mutants`, every variant), seconds (target < 5 s).
# Each is measured RUNS times (default 3). The machine is shared: compare figures of one run, and
# with COMPARE=DIR (a directory holding an older build's contract-harness and experimently-bench)
# each measurement runs the old build right after the new one, so both see the same load.
# Usage: Benchmarks/section3.sh [RUNS]     Env: COMPARE=DIR, SKIP_BUILD=1, MUTANTS_ARGS (e.g. --full)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-3}"
if [ -z "${SKIP_BUILD:-}" ]; then
    swift build -c release --product contract-harness >&2
    swift build -c release --product experimently-bench >&2
fi
NEW="$(swift build -c release --show-bin-path)"
BUILDS=("$NEW")
if [ -n "${COMPARE:-}" ]; then BUILDS+=("$COMPARE"); fi
label() { if [ "$1" = "$NEW" ]; then echo "this build"; else echo "compare ($1)"; fi; }
tmp="$(mktemp -d)"
# CPU seconds (user + system) of this shell's finished children so far, from bash's `times`.
# (`times` runs in this shell, not in a command substitution, whose children are its own.)
cpu_seconds() { times > "$tmp/times"; sed -n 2p "$tmp/times" | awk '{ gsub(/s/, "", $1); gsub(/s/, "", $2); split($1, u, "m"); split($2, s, "m"); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }'; }
trap 'rm -rf "$tmp"' EXIT

echo "== 1. explorer: 720 orders, --exhaustive (target >= 2000 schedules/s)"
for _ in $(seq 1 "$RUNS"); do
    for b in "${BUILDS[@]}"; do
        cpu_seconds > "$tmp/c0"
        "$b/contract-harness" explore Benchmarks/explore-three-holds-and-logout.json --exhaustive --out "$tmp/s.json" > "$tmp/e" 2>/dev/null || true
        line="$(sed -n 2p "$tmp/e")"
        cpu_seconds > "$tmp/c1"
        cpu="$(awk -v a="$(cat "$tmp/c0")" -v b="$(cat "$tmp/c1")" 'BEGIN { printf "%.0f", (b - a) * 1e6 / 720 }')"
        echo "  $(label "$b"): $line; $cpu us CPU per schedule (user + system, all processes)"
    done
done
# Where a schedule's CPU goes: the same checks over six explored clock advances followed by one
# flag lookup, then by four lookups one after another (720 schedules each). The first is the
# runner's cost of a schedule (worker protocol, fresh mock, clients, quiescence, checks) with a
# single request; the difference between the two, divided by three, is one request step's cost
# (SDK, URLSession, mock, recording, waiting for quiescence).
for _ in $(seq 1 "$RUNS"); do
    for f in one-request four-requests; do
        cpu_seconds > "$tmp/c0"
        "$NEW/contract-harness" explore "Benchmarks/explore-floor-$f.json" --exhaustive --out "$tmp/s.json" > "$tmp/e" 2>/dev/null || true
        line="$(sed -n 2p "$tmp/e")"
        cpu_seconds > "$tmp/c1"
        cpu="$(awk -v a="$(cat "$tmp/c0")" -v b="$(cat "$tmp/c1")" 'BEGIN { printf "%.0f", (b - a) * 1e6 / 720 }')"
        echo "  floor, $f: $line; $cpu us CPU per schedule"
    done
done
# The transport's floor: a fresh URLSession and 4 requests to a bare echo URLProtocol, nothing
# else, in two processes at once as the explorer's two workers. (The explorer itself takes its
# sessions from a pool, `InProcessSessions`, so a schedule pays the requests, not the session: read
# the 0-request figure of `experimently-bench session-floor 720 0 8` as the session's share.)
for _ in $(seq 1 "$RUNS"); do
    "$NEW/experimently-bench" session-floor 360 4 8 > "$tmp/f1" & "$NEW/experimently-bench" session-floor 360 4 8 > "$tmp/f2"; wait
    sed "s|^|  floor, worker 1 of 2: |" "$tmp/f1"; sed "s|^|  floor, worker 2 of 2: |" "$tmp/f2"
done
# The SDK's floor: the shipping client doing one schedule's work of the 720-order file (three
# lookups started together, clearCache, another user's flag: four requests) against a protocol that
# answers at once, with an in-memory offline store, and nothing of the mock or the runner; two
# processes at once, as the explorer's two workers. Their sum of schedules/s is what the SDK and
# the transport alone allow on this machine.
for _ in $(seq 1 "$RUNS"); do
    "$NEW/experimently-bench" sdk-floor 360 8 > "$tmp/f1" & "$NEW/experimently-bench" sdk-floor 360 8 > "$tmp/f2"; wait
    sed "s|^|  SDK floor, worker 1 of 2: |" "$tmp/f1"; sed "s|^|  SDK floor, worker 2 of 2: |" "$tmp/f2"
done

echo "== 2./3. in-process round trip vs echo URLProtocol (target <= 1.20x); BackendModel.respond alone (target < 3 us)"
for _ in $(seq 1 "$RUNS"); do
    for b in "${BUILDS[@]}"; do
        "$b/experimently-bench" mock-inprocess | sed "s|^|  $(label "$b"): |"
        "$b/experimently-bench" mock-model 100000 | sed "s|^|  $(label "$b"): |"
        # The mock's own cost per request without the transport (history, fault script, model):
        # what of the round trip's difference is the mock's work rather than the loading system's.
        "$b/experimently-bench" mock-handle 100000 2>/dev/null | sed "s|^|  $(label "$b"): |" || true
    done
done

echo "== 4. mutant matrix (target < 5 s)"
for _ in $(seq 1 "$RUNS"); do
    for b in "${BUILDS[@]}"; do
        # An older build may not know an option: then it runs without.
        line="$("$b/contract-harness" mutants ${MUTANTS_ARGS:-} --verdict "$tmp/m.json" 2>&1 | grep -E '^caught ' || true)"
        echo "  $(label "$b"): $line"
    done
done
