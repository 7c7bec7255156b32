#!/usr/bin/env python3
"""Hostile adapter (a fortieth outside tester's): runs the Python example's driver.py and rewrites its replies according to HOSTILE_MODE."""
import json, os, subprocess, sys, threading, time, re

MODE = os.environ.get("HOSTILE_MODE", "")
ARG = os.environ.get("HOSTILE_ARG", "")
# The correct Python example underneath (the repository's, found from this file's place).
DRIVER = os.environ.get("HOSTILE_DRIVER") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "Examples", "python-sdk", "driver.py")
child = subprocess.Popen([sys.executable, DRIVER], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, bufsize=0)
reqs = {}
lock = threading.Lock()
out = sys.stdout.buffer
nperf = [0]

def w(b):
    with lock:
        out.write(b); out.flush()

def pump_in():
    for line in sys.stdin.buffer:
        try:
            m = json.loads(line)
            reqs[m.get("id")] = m
        except Exception:
            pass
        if MODE == "exit-after" and reqs and m.get("type") == "perform":
            nperf[0] += 1
            if nperf[0] >= int(ARG or 3):
                sys.stderr.write("hostile: exiting mid-scenario\n"); sys.stderr.flush()
                os._exit(3)
        child.stdin.write(line); child.stdin.flush()
    child.stdin.close()

threading.Thread(target=pump_in, daemon=True).start()

def op_of(rid):
    m = reqs.get(rid, {})
    return m.get("type"), (m.get("operation") or {}).get("name")

for raw in child.stdout:
    try:
        r = json.loads(raw)
    except Exception:
        w(raw); continue
    rid = r.get("id"); typ, op = op_of(rid)
    res = r.get("result")
    if MODE == "nan-hash" and op == "hashUser":
        w(raw.replace(b'"value":', b'"value":NaN,"x":')); continue
    if MODE == "nan-string-hash" and op == "hashUser":
        res["value"] = "NaN"
    if MODE == "variant-surrogate" and op == "getAssignment" and isinstance(res, dict) and isinstance(res.get("value"), dict):
        s = json.dumps(r, ensure_ascii=True)
        s = s.replace('"variant_name": "' , '"variant_name": "\\ud800', 1)
        w(s.encode() + b"\n"); continue
    if MODE == "user-surrogate" and op == "getAssignment" and isinstance(res, dict) and isinstance(res.get("value"), dict):
        s = json.dumps(r, ensure_ascii=True)
        s = re.sub(r'"user_id": "[^"]*"', '"user_id": "\\\\udcff"', s, count=1)
        w(s.encode() + b"\n"); continue
    if MODE == "dup-key-variant" and op == "getAssignment" and isinstance(res, dict) and isinstance(res.get("value"), dict):
        v = res["value"].get("variant_name")
        other = "treatment" if v == "control" else "control"
        s = json.dumps(r, separators=(",", ":"))
        s = s.replace('"variant_name":"%s"' % v, '"variant_name":"%s","variant_name":"%s"' % (v, other), 1)
        w(s.encode() + b"\n"); continue
    if MODE == "dup-key-variant-rev" and op == "getAssignment" and isinstance(res, dict) and isinstance(res.get("value"), dict):
        v = res["value"].get("variant_name")
        other = "treatment" if v == "control" else "control"
        s = json.dumps(r, separators=(",", ":"))
        s = s.replace('"variant_name":"%s"' % v, '"variant_name":"%s","variant_name":"%s"' % (other, v), 1)
        w(s.encode() + b"\n"); continue
    if MODE == "dup-reply" and typ == "perform":
        w(raw); bad = dict(r); bad["result"] = {"error": "networkError", "code": -1004}
        w((json.dumps(bad) + "\n").encode()); continue
    if MODE == "value-and-error" and typ == "perform" and isinstance(res, dict) and "value" in res:
        res["error"] = "networkError"; res["code"] = -1004
    if MODE == "error-and-value" and typ == "perform" and isinstance(res, dict) and "error" in res:
        res["value"] = None
    if MODE == "empty-result" and typ == "perform" and op in ("track", "clearCache"):
        r["result"] = {}
    if MODE == "extra-fields":
        r["extra"] = {"x": [1, 2, 3]}
        if isinstance(res, dict): res["zzz"] = "extra"
    if MODE == "unknown-error-kind" and typ == "perform" and isinstance(res, dict) and "error" in res:
        res["error"] = res["error"].lower()
    if MODE == "status-string" and typ == "perform" and isinstance(res, dict) and "status" in res:
        res["status"] = str(res["status"])
    if MODE == "code-float" and typ == "perform" and isinstance(res, dict) and "code" in res:
        res["code"] = res["code"] + 0.5
    if MODE == "code-frac" and typ == "perform" and isinstance(res, dict) and "code" in res:
        res["code"] = res["code"] - 0.9
    if MODE == "status-frac" and typ == "perform" and isinstance(res, dict) and "status" in res:
        res["status"] = res["status"] + 0.9
    if MODE == "id-float":
        s = json.dumps(r).replace('"id": %d' % rid, '"id": %d.0' % rid, 1) if isinstance(rid, int) else json.dumps(r)
        w(s.encode() + b"\n"); continue
    if MODE == "garbage-stdout" and typ == "perform":
        w(b"hello from a stray print()\n")
    if MODE == "stderr-flood":
        sys.stderr.write("x" * 100000 + "\n"); sys.stderr.flush()
    if MODE == "huge" and typ == "perform" and isinstance(res, dict) and isinstance(res.get("value"), dict):
        res["value"]["padding"] = "y" * int(ARG or 50_000_000)
    if MODE == "slow" and typ == "perform":
        time.sleep(float(ARG or 6))
    if MODE == "persisted-found-string" and typ == "persisted":
        res["found"] = "false" if res.get("found") else "true"
    if MODE == "persisted-found-false-with-value" and typ == "persisted" and isinstance(res, dict) and res.get("value") is not None:
        res["found"] = False
    if MODE == "clock-next-now" and typ == "clock":
        res["next"] = reqs[rid]["now"]
    if MODE == "clock-next-past" and typ == "clock":
        res["next"] = reqs[rid]["now"] - 100
    if MODE == "clock-now-wrong" and typ == "clock":
        res["now"] = reqs[rid]["now"] + 1000
    if MODE == "clock-next-nan" and typ == "clock":
        w(raw.replace(b'"next":null', b'"next":NaN')); continue
    if MODE == "settle-always-true" and typ == "settle":
        res["settled"] = True
    if MODE == "settle-string" and typ == "settle":
        res["settled"] = "true"
    if MODE == "hello-dup-caps" and typ == "hello":
        res["capabilities"] = res["capabilities"] + res["capabilities"] + ["virtualClock"]
    if MODE == "hello-nonstring-cap" and typ == "hello":
        res["capabilities"] = res["capabilities"] + [5, None]
    if MODE == "garbage-then-exit" and typ == "perform":
        w(b"not json at all\n"); os._exit(0)
    if MODE == "reply-then-exit" and typ == "perform":
        w(raw); os._exit(0)
    if MODE == "partial-line" and typ == "perform":
        w(raw[: len(raw) // 2]); os._exit(0)
    if MODE == "close-stdout" and typ == "perform":
        out.close(); os.close(1); time.sleep(30); os._exit(0)
    if MODE == "seeded-wrong" and typ == "seed_store":
        res["seeded"] = 0
    if MODE == "bom" and typ == "hello":
        w(b"\xef\xbb\xbf" + json.dumps(r).encode() + b"\n"); continue
    if MODE == "crlf":
        w(json.dumps(r).encode() + b"\r\n"); continue
    if MODE == "invalid-utf8" and typ == "perform":
        w(raw.replace(b'"value"', b'"v\xffalue"', 1)); continue
    w((json.dumps(r, allow_nan=True) + "\n").encode())
