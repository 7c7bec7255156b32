#!/usr/bin/env bash
# Issue 10 "done when": the two shapes that used to kill `contract-harness run` (a step timing out
# while SDK work is pending: Tests/ContractHarnessTests/Fixtures/crash), run ROUNDS times (default
# 16) beside the whole shipped suite: never an exit of 128 or more, the verdict always lists every
# scenario, the two shapes fail (their step times out) and every other scenario passes.
# Usage: Benchmarks/crash-isolation-16.sh [ROUNDS] [extra run options, e.g. --jobs 1]
set -uo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-16}"; shift || true
swift build -c release --product contract-harness >&2 || exit 70
bin="$(swift build -c release --show-bin-path)/contract-harness"
verdict="$(mktemp -d)/verdict.json"
expected=$(( $(ls scenarios/*.json | wc -l) + $(ls Tests/ContractHarnessTests/Fixtures/crash/*.json | wc -l) ))
bad=0
for i in $(seq 1 "$rounds"); do
    "$bin" run Tests/ContractHarnessTests/Fixtures/crash scenarios --verdict "$verdict" "$@" >/dev/null 2>&1
    status=$?
    summary=$(python3 - "$verdict" "$expected" <<'PY'
import json, sys
v = json.load(open(sys.argv[1])); expected = int(sys.argv[2])
s = v["scenarios"]
wrong = [x["name"] + "=" + x["status"] for x in s
         if x["status"] != ("failed" if x["name"].startswith("crash-") else "passed")]
print(f"{len(s)}/{expected} listed, in_progress={v.get('in_progress', False)}, unexpected: {wrong or 'none'}")
sys.exit(0 if len(s) == expected and not wrong and not v.get("in_progress") else 1)
PY
)
    ok=$?
    echo "round $i: exit $status, $summary"
    if [ "$status" -ge 128 ] || [ "$ok" -ne 0 ]; then bad=$((bad + 1)); fi
done
echo "$bad of $rounds rounds wrong"
[ "$bad" -eq 0 ]
