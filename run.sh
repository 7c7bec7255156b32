#!/usr/bin/env bash
# The main job: build the harness in release mode and run the scenario suite against the Swift SDK
# and the in-process mock backend, writing verdict.json. Extra arguments go to
# `contract-harness run` (e.g. ./run.sh --filter race, ./run.sh scenarios/contract-smoke.json).
# Exit status is the harness's: 0 all passed, 1 a check failed, 64 malformed input, 70 internal fault.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi
swift build -c release --product contract-harness >&2
bin="$(swift build -c release --show-bin-path)/contract-harness"
has_verdict=0
for a in "$@"; do [ "$a" = "--verdict" ] && has_verdict=1; done
if [ "$has_verdict" = 1 ]; then
    exec "$bin" run "$@"
else
    exec "$bin" run --verdict verdict.json "$@"
fi
