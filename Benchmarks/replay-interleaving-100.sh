#!/usr/bin/env bash
# Issue 15 "done when": replaying a written interleaving gives the same history digest 100 times in
# a row. Explores scenarios/interleave-two-concurrent-assignments-one-request.json with
# `explore --interleave` against a variant only interleaving catches (default:
# unregister-before-cache-write), writes the failing interleaving, then runs that file ROUNDS times
# (default 100) with `contract-harness run` (a fresh process each time) and prints each run's
# status and history digest (from its verdict), the number of distinct digests and whether every
# replay failed the same way. Exit 0 when all ROUNDS replays fail with one digest. Release build.
# Usage: Benchmarks/replay-interleaving-100.sh [ROUNDS] [MUTANT]
set -uo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-100}"
mutant="${2:-unregister-before-cache-write}"
if [ -z "${SKIP_BUILD:-}" ]; then swift build -c release --product contract-harness >&2 || exit 70; fi
bin="$(swift build -c release --show-bin-path)/contract-harness"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
file="$dir/interleaving.json"
"$bin" explore scenarios/interleave-two-concurrent-assignments-one-request.json --interleave --mutant "$mutant" --out "$file" >"$dir/explore.log" 2>&1
if [ ! -s "$file" ]; then echo "explore --interleave wrote no failing interleaving:"; cat "$dir/explore.log"; exit 1; fi
sed -n '1,3p' "$dir/explore.log"
for i in $(seq 1 "$rounds"); do
    "$bin" run "$file" --mutant "$mutant" --verdict "$dir/v$i.json" >/dev/null 2>&1
    echo "exit $?" >"$dir/exit$i"
done
python3 - "$dir" "$rounds" <<'PY'
import json, sys, collections
d, n = sys.argv[1], int(sys.argv[2])
digests, statuses = collections.Counter(), collections.Counter()
for i in range(1, n + 1):
    try:
        s = json.load(open(f"{d}/v{i}.json"))["scenarios"][0]
        digests[s.get("history_digest", "")] += 1
        statuses[s["status"]] += 1
    except Exception as e:
        statuses[f"no verdict ({e})"] += 1
print(f"{n} replays: statuses {dict(statuses)}; distinct history digests {len(digests)}: "
      + ", ".join(f"{k} x{v}" for k, v in digests.items()))
ok = len(digests) == 1 and statuses.get("failed", 0) == n
print("same history digest every time: " + ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
