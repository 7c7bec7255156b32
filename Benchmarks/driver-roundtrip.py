#!/usr/bin/env python3
"""Median protocol round trip of one operation through an experimently-driver/1 adapter.

Usage: Benchmarks/driver-roundtrip.py [ADAPTER-COMMAND] [N]
(default: the debug build's experimently-driver, N = 2000). Sends hello and create_client, then N
sequential `perform hashUser` requests (no network: the protocol's own cost), and prints the median
and 95th percentile in milliseconds. Target (issue 12): median under 1 ms.
"""
import json
import statistics
import subprocess
import sys
import time


def main():
    command = sys.argv[1] if len(sys.argv) > 1 else None
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    if command is None:
        binpath = subprocess.check_output(["swift", "build", "--show-bin-path"], text=True).strip()
        subprocess.check_call(["swift", "build", "--product", "experimently-driver"], stdout=subprocess.DEVNULL)
        command = binpath + "/experimently-driver"
    p = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def ask(message):
        p.stdin.write(json.dumps(message) + "\n")
        p.stdin.flush()
        reply = json.loads(p.stdout.readline())
        if reply.get("id") != message["id"] or "error" in reply:
            sys.exit("unexpected reply %r to %r" % (reply, message))
        return reply["result"]

    hello = ask({"id": 1, "type": "hello", "protocol": "experimently-driver/1"})
    ask({"id": 2, "type": "create_client", "client": "b.main", "scope": "b", "now": 1700000000,
         "settings": {"base_url": "http://127.0.0.1:9", "api_key": "k", "timeout": 10, "cache_size": 1000,
                      "cache_ttl": 300, "offline_fallback": True}})
    samples = []
    for i in range(n):
        started = time.perf_counter()
        ask({"id": 10 + i, "type": "perform", "client": "b.main",
             "operation": {"name": "hashUser", "user_id": "user-%d" % i, "key": "my-flag"}})
        samples.append((time.perf_counter() - started) * 1000)
    ask({"id": 9, "type": "shutdown"})
    p.wait(timeout=5)
    samples.sort()
    print("driver round trip (%s %s, %d ops): median %.3f ms, p95 %.3f ms"
          % (hello["sdk"]["name"], hello["sdk"]["version"], n, statistics.median(samples), samples[int(n * 0.95)]))


if __name__ == "__main__":
    main()
