#!/usr/bin/env bash
# `contract-harness serve` memory under concurrent large bodies (issue 10 section 2; the body
# budget in Documentation/CrossSDK.md, "Memory"), against a release build. For each N (default
# 600 and 1000): start serve with a journal, open N connections at once, each POSTing one body of
# 1,040,043 bytes to /api/v1/tracking/track and reading its status line; then print the status
# counts, serve's VmHWM (peak resident) and VmRSS right after the load, SIGTERM it, print serve's
# own last line and the journal's entry count (must equal N).
#
# Usage: Benchmarks/serve-memory.sh [N...]      Env: SKIP_BUILD (unset), BIN (the release binary)
set -euo pipefail
cd "$(dirname "$0")/.."
COUNTS=("$@")
[ ${#COUNTS[@]} -gt 0 ] || COUNTS=(600 1000)
WORK="$(mktemp -d /tmp/serve-memory.XXXXXX)"
ulimit -n "$(ulimit -Hn)"
if [ -z "${BIN:-}" ]; then
    if [ -z "${SKIP_BUILD:-}" ]; then timeout 1500 swift build -c release --product contract-harness >&2; fi
    BIN="$(swift build -c release --show-bin-path)/contract-harness"
fi
SERVE_PID=""
trap '[ -n "$SERVE_PID" ] && kill -TERM "$SERVE_PID" 2>/dev/null; rm -rf "$WORK"' EXIT

for N in "${COUNTS[@]}"; do
    "$BIN" serve --port 0 --journal "$WORK/journal.json" >"$WORK/serve.out" 2>"$WORK/serve.err" &
    SERVE_PID=$!
    for _ in $(seq 1 200); do grep -q EXPERIMENTLY_API_KEY= "$WORK/serve.out" 2>/dev/null && break; sleep 0.05; done
    URL="$(sed -n 's/^EXPERIMENTLY_API_URL=//p' "$WORK/serve.out")"
    KEY="$(sed -n 's/^EXPERIMENTLY_API_KEY=//p' "$WORK/serve.out")"
    python3 - "${URL##*:}" "$N" "$SERVE_PID" "$KEY" <<'PY'
import collections, socket, sys, threading, time
port, n, pid, key = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
big = b'{"user_id":"u","event_name":"e","properties":{"p":"' + b"x" * 1040000 + b'"}}'
request = (b"POST /api/v1/tracking/track HTTP/1.1\r\nHost: x\r\nX-API-Key: " + key.encode()
           + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(big) + big)
statuses = collections.Counter()
lock = threading.Lock()
def post():
    try:
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(request)
        line = s.recv(100).split(b"\r\n")[0].decode(errors="replace")
        s.close()
    except Exception as e:
        line = f"error {type(e).__name__}"
    with lock:
        statuses[line] += 1
def status():
    f = dict(l.split(":", 1) for l in open(f"/proc/{pid}/status").read().splitlines() if ":" in l)
    return f["VmHWM"].strip(), f["VmRSS"].strip()
threads = [threading.Thread(target=post) for _ in range(n)]
start = time.monotonic()
[t.start() for t in threads]; [t.join() for t in threads]
elapsed = time.monotonic() - start
hwm, rss = status()
print(f"N={n}: {dict(statuses)} in {elapsed:.1f} s; serve VmHWM {hwm}, VmRSS after the load {rss}")
PY
    kill -TERM "$SERVE_PID"; wait "$SERVE_PID" || true; SERVE_PID=""
    echo "N=$N: serve: $(tail -n 1 "$WORK/serve.err")"
    python3 - "$WORK/journal.json" "$N" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); n = int(sys.argv[2])
tracks = [e for e in j["history"] if e.get("path") == "/api/v1/tracking/track"]
print(f"N={n}: journal entries {len(j['history'])} ({len(tracks)} /track), equal to the requests: {len(tracks) == n}")
PY
    rm -f "$WORK/journal.json"
done
