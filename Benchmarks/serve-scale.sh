#!/usr/bin/env bash
# `contract-harness serve` at scale (issue 10 section 2), against a release build:
#  1. bounded: the 1e999 body plus 300 bodies near the 1 MiB limit, then SIGTERM: exit status,
#     journal validity (every seq once), peak resident memory (VmHWM, printed by serve);
#  2. connections: 10,000 concurrent keep-alive connections including 1,000 held requests;
#     threads of the serve process (/proc/PID/task) and its resident memory while they are open;
#  3. throughput on the flag evaluate route (wrk, keep-alive) for serve, pytest-httpserver and
#     FastAPI/uvicorn serving the same route, and nginx serving the same fixed body.
#
# Usage: Benchmarks/serve-scale.sh [bounded|connections|throughput|all]   (default all)
# Env:   WRK_THREADS (1), WRK_CONNECTIONS (32), WRK_DURATION (4s), VENV (/tmp/serve-bench-venv),
#        SKIP_BUILD (unset). Installs wrk and nginx-light (apt) and a venv with pytest-httpserver,
#        fastapi and uvicorn when missing. The figures are for one shared machine: compare the
#        ratios of one run, not absolute numbers across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT="${1:-all}"
THREADS="${WRK_THREADS:-1}"
CONNECTIONS="${WRK_CONNECTIONS:-32}"
DURATION="${WRK_DURATION:-4s}"
VENV="${VENV:-/tmp/serve-bench-venv}"
ROUTE="/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=bench-user"
BODY='{"config":null,"enabled":true,"key":"sdk_contract_flag","reason":"rollout"}'
KEY="sdk-contract-key"
WORK="$(mktemp -d /tmp/serve-scale.XXXXXX)"
ulimit -n "$(ulimit -Hn)" # 10,000 sockets on each side

if [ -z "${SKIP_BUILD:-}" ]; then timeout 1500 swift build -c release --product contract-harness >&2; fi
BIN="$(swift build -c release --show-bin-path)/contract-harness"

PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; PIDS=(); }
trap 'cleanup; rm -rf "$WORK"' EXIT

start_serve() { # extra args...; sets SERVE_PID and SERVE_URL
    "$BIN" serve --port 0 "$@" >"$WORK/serve.out" 2>"$WORK/serve.err" &
    SERVE_PID=$!
    PIDS+=("$SERVE_PID")
    for _ in $(seq 1 200); do grep -q EXPERIMENTLY_API_KEY= "$WORK/serve.out" 2>/dev/null && break; sleep 0.05; done
    SERVE_URL="$(sed -n 's/^EXPERIMENTLY_API_URL=//p' "$WORK/serve.out")"
}

stop_serve() { # sets SERVE_STATUS (not in a subshell: only this shell can wait for serve)
    kill -TERM "$SERVE_PID"
    SERVE_STATUS=0
    wait "$SERVE_PID" || SERVE_STATUS=$?
    PIDS=()
}

bounded() {
    python3 - "$WORK" <<'PY'
import sys
work = sys.argv[1]
p = b'{"event_type":"big","user_id":"u","experiment_key":"sdk_contract_ab","metadata":{"pad":"'
open(f"{work}/valid.json", "wb").write(p + b"x" * (1048000 - len(p) - 3) + b'"}}')
open(f"{work}/junk.json", "wb").write(b"{" * 1048000)
open(f"{work}/inf.json", "wb").write(b'{"event_type":"purchase","user_id":"u","experiment_key":"sdk_contract_ab","value":1e999}')
PY
    start_serve --journal "$WORK/journal.json"
    local codes
    codes="$(curl -s -o /dev/null -w '%{http_code}\n' -H "X-API-Key: $KEY" -H 'Content-Type: application/json' --data-binary @"$WORK/inf.json" "$SERVE_URL/api/v1/tracking/track")"
    echo "1e999 body: HTTP $codes"
    local args=()
    for i in $(seq 1 300); do
        if [ $((i % 2)) = 0 ]; then f=valid; else f=junk; fi
        args+=(--next -s -o /dev/null -w '%{http_code}\n' -H "X-API-Key: $KEY" -H 'Content-Type: application/json' --data-binary @"$WORK/$f.json" "$SERVE_URL/api/v1/tracking/track")
    done
    curl "${args[@]:1}" | sort | uniq -c | sed 's/^/300 bodies: /'
    stop_serve
    echo "serve exit status on SIGTERM: $SERVE_STATUS"
    tail -n 1 "$WORK/serve.err"
    python3 - "$WORK/journal.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
seqs = sorted(e["seq"] for e in j["history"])
print(f"journal: valid JSON, {len(j['history'])} entries, every seq 1..{len(seqs)} once: {seqs == list(range(1, len(seqs) + 1))}, "
      f"1e999 kept: {any('1e999' in json.dumps(e.get('json', {})) or e.get('json', {}).get('value') == float('inf') for e in j['history'])}")
PY
    ls -l "$WORK/journal.json" | awk '{print "journal size: " $5 " bytes"}'
}

connections() {
    echo '[{"match": {"path": "/api/v1/tracking/assign"}, "action": {"hold": {"label": "bench"}}}]' >"$WORK/faults.json"
    # The idle connections ask for /health, which counts under the budget of other paths (300 a
    # minute from one address, as upstream): the benchmark's fixtures raise that budget.
    python3 - "Benchmarks/explore-three-holds-and-logout.json" >"$WORK/fixtures.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))["fixtures"]
f["rate_limit"] = {"other_limit": 1000000}
print(json.dumps(f))
PY
    start_serve --faults "$WORK/faults.json" --fixtures "$WORK/fixtures.json"
    python3 - "$SERVE_URL" "$SERVE_PID" "$KEY" <<'PY'
import asyncio, os, sys, time
url, pid, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
host, port = url.split("//")[1].split(":")
TOTAL, HELD = 10_000, 1_000

def status():
    fields = dict(l.split(":", 1) for l in open(f"/proc/{pid}/status").read().splitlines() if ":" in l)
    return len(os.listdir(f"/proc/{pid}/task")), fields["VmRSS"].strip(), fields["VmHWM"].strip()

async def one(i, ready):
    r, w = await asyncio.open_connection(host, int(port))
    if i < HELD:
        body = f'{{"experiment_key":"sdk_contract_ab","user_id":"held-{i}"}}'
        w.write(f"POST /api/v1/tracking/assign HTTP/1.1\r\nHost: h\r\nX-API-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode())
        await w.drain()
        ready.append(i)
        return r, w, None
    w.write(b"GET /health HTTP/1.1\r\nHost: h\r\n\r\n")
    await w.drain()
    head = await r.readuntil(b"\r\n\r\n")
    n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
    await r.readexactly(n)
    ready.append(i)
    return r, w, head.split(b" ")[1]

async def main():
    ready = []
    start = time.time()
    sem = asyncio.Semaphore(500)
    async def limited(i):
        async with sem:
            return await one(i, ready)
    conns = await asyncio.gather(*(limited(i) for i in range(TOTAL)))
    ok = sum(1 for c in conns if c[2] == b"200")
    await asyncio.sleep(1.0)  # let the held requests park
    threads, rss, hwm = status()
    print(f"{TOTAL} connections open ({HELD} with a held request, {ok} answered 200) in {time.time() - start:.1f} s; "
          f"serve threads: {threads}; VmRSS {rss}; VmHWM {hwm}")
    for r, w, _ in conns:
        w.close()
asyncio.run(main())
PY
    stop_serve
    echo "serve exit status on SIGTERM: $SERVE_STATUS"
    tail -n 1 "$WORK/serve.err"
}

run_wrk() { # name url -> prints requests/second
    local out
    out="$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" -H "X-API-Key: $KEY" "$2")"
    echo "== $1: $(echo "$out" | grep -E 'Requests/sec|Non-2xx|Socket errors' | tr '\n' ' ')" >&2
    echo "$out" | awk '/^Requests\/sec:/ { print $2 }'
}

wait_body() { # url
    for _ in $(seq 1 100); do
        [ "$(curl -s --max-time 1 -H "X-API-Key: $KEY" "$1" || true)" = "$BODY" ] && return 0
        sleep 0.1
    done
    echo "server at $1 did not answer the expected JSON" >&2; exit 1
}

throughput() {
    command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
    command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { apt-get update -qq && apt-get install -y -qq nginx-light >/dev/null; }
    if ! "$VENV/bin/python" -c 'import pytest_httpserver, fastapi, uvicorn' 2>/dev/null; then
        python3 -m venv "$VENV" && "$VENV/bin/pip" install -q pytest-httpserver fastapi uvicorn
    fi
    # The reference flag, with a rate limit wrk cannot reach (the default 6,000 per minute would
    # turn the run into 429s).
    echo '{"api_keys": [{"key": "sdk-contract-key"}], "flags": [{"key": "sdk_contract_flag", "status": "ACTIVE", "rollout_percentage": 100}],
           "rate_limit": {"limit": 1000000000, "window_seconds": 60}}' >"$WORK/fixtures.json"
    start_serve --fixtures "$WORK/fixtures.json"
    wait_body "$SERVE_URL$ROUTE"
    SERVE_RPS="$(run_wrk "contract-harness serve (evaluate route, real backend model)" "$SERVE_URL$ROUTE")"
    stop_serve

    cat >"$WORK/phs.py" <<'PY'
import logging, signal, sys, threading
from pytest_httpserver import HTTPServer
logging.getLogger("werkzeug").setLevel(logging.ERROR)
server = HTTPServer(host="127.0.0.1", port=int(sys.argv[1]), threaded=True)
server.expect_request("/api/v1/feature-flags/evaluate/sdk_contract_flag", method="GET").respond_with_data(
    '{"config":null,"enabled":true,"key":"sdk_contract_flag","reason":"rollout"}', content_type="application/json")
server.start()
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
stop.wait()
server.stop()
PY
    "$VENV/bin/python" "$WORK/phs.py" 18391 >"$WORK/phs.log" 2>&1 & PIDS+=($!)
    wait_body "http://127.0.0.1:18391$ROUTE"
    PHS_RPS="$(run_wrk "pytest-httpserver (threaded, fixed body)" "http://127.0.0.1:18391$ROUTE")"
    cleanup

    cat >"$WORK/fastapi_app.py" <<'PY'
import hashlib
from fastapi import FastAPI, Header, HTTPException
app = FastAPI()
@app.get("/api/v1/feature-flags/evaluate/{key}")
def evaluate(key: str, user_id: str, x_api_key: str = Header(None)):
    if x_api_key != "sdk-contract-key":
        raise HTTPException(401, "Invalid API Key")
    bucket = int(hashlib.md5(f"{user_id}:{key}".encode()).hexdigest(), 16) % 100
    return {"config": None, "enabled": bucket < 100, "key": key, "reason": "rollout"}
PY
    (cd "$WORK" && exec "$VENV/bin/uvicorn" fastapi_app:app --port 18392 --log-level warning --no-access-log >"$WORK/uvicorn.log" 2>&1) & PIDS+=($!)
    for _ in $(seq 1 100); do curl -s --max-time 1 "http://127.0.0.1:18392$ROUTE" -H "X-API-Key: $KEY" >/dev/null && break; sleep 0.1; done
    FASTAPI_RPS="$(run_wrk "FastAPI/uvicorn (one worker, same route)" "http://127.0.0.1:18392$ROUTE")"
    cleanup

    mkdir -p "$WORK/nginx"
    cat >"$WORK/nginx/nginx.conf" <<NGX
worker_processes 1;
error_log $WORK/nginx/error.log;
pid $WORK/nginx/nginx.pid;
daemon off;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx; proxy_temp_path $WORK/nginx; fastcgi_temp_path $WORK/nginx; uwsgi_temp_path $WORK/nginx; scgi_temp_path $WORK/nginx;
    server {
        listen 127.0.0.1:18393;
        location / { default_type application/json; return 200 '$BODY'; }
    }
}
NGX
    /usr/sbin/nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" & PIDS+=($!)
    wait_body "http://127.0.0.1:18393$ROUTE"
    NGINX_RPS="$(run_wrk "nginx (one worker, fixed body)" "http://127.0.0.1:18393$ROUTE")"
    cleanup

    echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION, keep-alive, loopback, one run (shared 2-core machine)"
    printf '%-34s %10s requests/s\n' "contract-harness serve" "$SERVE_RPS" "pytest-httpserver" "$PHS_RPS" "FastAPI/uvicorn" "$FASTAPI_RPS" "nginx (fixed body)" "$NGINX_RPS"
    awk -v s="$SERVE_RPS" -v p="$PHS_RPS" -v f="$FASTAPI_RPS" -v n="$NGINX_RPS" 'BEGIN {
        printf "serve / pytest-httpserver: %.1fx (target >= 10x)\n", s / p
        printf "serve / FastAPI-uvicorn:   %.1fx (target >= 10x)\n", s / f
        printf "serve / nginx:             %.2fx (aim 0.4x)\n", s / n }'
}

case "$WHAT" in
    bounded) bounded ;;
    connections) connections ;;
    throughput) throughput ;;
    all) bounded; connections; throughput ;;
    *) echo "usage: $0 [bounded|connections|throughput|all]" >&2; exit 64 ;;
esac
