#!/usr/bin/env python3
"""A deliberately WRONG adapter: reads the first 4 digest bytes big-endian.

`contract-harness vectors` must fail against it and name "byte order" as the likely cause; the
harness's own tests use it to prove that the check can fail.
"""

import hashlib
import json
import sys


def main():
    request = json.load(sys.stdin)
    hashes = []
    for user_id, flag_key in request["inputs"]:
        digest = hashlib.md5((user_id + ":" + flag_key).encode("utf-8")).digest()
        hashes.append(int.from_bytes(digest[:4], "big") / 4294967296)
    json.dump({"hashes": hashes, "md5_hex": None}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
