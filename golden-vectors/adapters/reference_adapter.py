#!/usr/bin/env python3
"""Reference adapter for `contract-harness vectors --sdk-command` (the upstream adapter protocol).

Reads {"inputs": [[user_id, flag_key], ...]} from standard input and prints
{"hashes": [...], "md5_hex": [...]} on standard output, computing the golden hash of
CONTRACT.md section 6 with hashlib. An SDK's own adapter does the same by calling the SDK's
hash function instead; it may print "md5_hex": null when the SDK does not expose the digest.
"""

import hashlib
import json
import sys


def golden(user_id, flag_key):
    digest = hashlib.md5((user_id + ":" + flag_key).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "little") / 4294967296, digest.hex()


def main():
    request = json.load(sys.stdin)
    results = [golden(user_id, flag_key) for user_id, flag_key in request["inputs"]]
    json.dump({"hashes": [h for h, _ in results], "md5_hex": [m for _, m in results]}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
