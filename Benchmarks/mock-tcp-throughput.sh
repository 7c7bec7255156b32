#!/usr/bin/env bash
# Loopback HTTP/1.1 throughput: experimently-bench mock-serve (MockHTTPServer in front of the real
# MockBackend: auth, routing, rollout bucketing, history) vs a Python pytest-httpserver serving the
# same route and JSON, both measured with wrk and keep-alive.
#
# Usage: Benchmarks/mock-tcp-throughput.sh
# Env:   WRK_THREADS (2), WRK_CONNECTIONS (32), WRK_DURATION (5s), SWIFT_PORT (18080),
#        PY_PORT (18081), VENV (/tmp/experimently-bench-venv), SKIP_BUILD (unset).
# Prints each server's requests/second and the ratio; target: the Swift server >= 3x.
set -euo pipefail

cd "$(dirname "$0")/.."
THREADS="${WRK_THREADS:-2}"
CONNECTIONS="${WRK_CONNECTIONS:-32}"
DURATION="${WRK_DURATION:-5s}"
SWIFT_PORT="${SWIFT_PORT:-18080}"
PY_PORT="${PY_PORT:-18081}"
VENV="${VENV:-/tmp/experimently-bench-venv}"
ROUTE="/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=bench-user"
# The mock backend writes keys sorted; Python serves the same bytes.
EXPECTED='{"config":null,"enabled":true,"key":"sdk_contract_flag","reason":"rollout"}'
KEY_HEADER="X-API-Key: sdk-contract-key"

if ! command -v wrk >/dev/null 2>&1; then
    echo "installing wrk (Debian package)" >&2
    apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import pytest_httpserver' 2>/dev/null; then
    echo "installing pytest-httpserver into $VENV" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q pytest-httpserver
fi
if [ -z "${SKIP_BUILD:-}" ]; then
    timeout 1200 swift build -c release --product experimently-bench >&2
fi
BIN="$(swift build -c release --show-bin-path)/experimently-bench"

PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

wait_ready() { # url
    for _ in $(seq 1 100); do
        if [ "$(curl -s --max-time 1 -H "$KEY_HEADER" "$1" || true)" = "$EXPECTED" ]; then return 0; fi
        sleep 0.1
    done
    echo "server at $1 did not answer the expected JSON" >&2
    exit 1
}

run_wrk() { # name url -> prints requests/second
    local out
    out="$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -H "$KEY_HEADER" "$2")"
    echo "== $1" >&2
    echo "$out" >&2
    echo "$out" | awk '/^Requests\/sec:/ { print $2 }'
}

"$BIN" mock-serve --port "$SWIFT_PORT" >/tmp/experimently-mock-serve.log 2>&1 &
PIDS+=($!)
wait_ready "http://127.0.0.1:$SWIFT_PORT$ROUTE"
SWIFT_RPS="$(run_wrk "MockHTTPServer (experimently-bench mock-serve)" "http://127.0.0.1:$SWIFT_PORT$ROUTE")"
cleanup
PIDS=()

cat >/tmp/experimently-phs.py <<'PY'
import logging, signal, sys, threading
from pytest_httpserver import HTTPServer
logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no per-request access log
port = int(sys.argv[1])
# threaded=True: one thread per request, its best configuration for concurrent clients.
# (Werkzeug answers `Connection: close` here, so wrk reconnects for every request.)
server = HTTPServer(host="127.0.0.1", port=port, threaded=True)
server.expect_request("/api/v1/feature-flags/evaluate/sdk_contract_flag", method="GET").respond_with_data(
    '{"config":null,"enabled":true,"key":"sdk_contract_flag","reason":"rollout"}', content_type="application/json")
server.start()
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
signal.signal(signal.SIGINT, lambda *_: stop.set())
stop.wait()
server.stop()
PY
"$VENV/bin/python" /tmp/experimently-phs.py "$PY_PORT" >/tmp/experimently-phs.log 2>&1 &
PIDS+=($!)
wait_ready "http://127.0.0.1:$PY_PORT$ROUTE"
PY_RPS="$(run_wrk "pytest-httpserver (threaded)" "http://127.0.0.1:$PY_PORT$ROUTE")"

echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION, keep-alive, loopback"
echo "MockHTTPServer     requests/s: $SWIFT_RPS"
echo "pytest-httpserver  requests/s: $PY_RPS"
awk -v s="$SWIFT_RPS" -v p="$PY_RPS" 'BEGIN { r = s / p; printf "ratio: %.1fx (target >= 3x): %s\n", r, (r >= 3 ? "PASS" : "FAIL") }'
