#!/usr/bin/env python3
"""Generates the golden vector files of this folder with Python's hashlib only.

This generator shares no code with the Swift SDK or the mock backend: it is the independent
oracle the Swift tests compare against (CONTRACT.md sections 2 and 6).

    python3 golden-vectors/generate.py           # rewrite the three JSON files
    python3 golden-vectors/generate.py --check   # exit 1 (naming the files) when a committed file differs

Files:
    hash-vectors.json   the upstream cross-SDK format: 9 hash vectors, 2 rollout vectors
    hash-extended.json  inputs where implementations part ways (Unicode, separators, edges)
    bucketing.json      the server's experiment buckets and md5-mod100 flag buckets
"""

import hashlib
import json
import os
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
DIVISOR = 2 ** 32


def digest(user_id, key):
    """MD5 of UTF-8("{user_id}:{key}")."""
    return hashlib.md5((user_id + ":" + key).encode("utf-8")).digest()


def golden_hash(user_id, key):
    """First 4 digest bytes read as a little-endian unsigned 32-bit integer, divided by 2^32."""
    return int.from_bytes(digest(user_id, key)[:4], "little") / DIVISOR


def md5_mod100(user_id, key):
    """The whole 16-byte digest as a big-endian unsigned integer, mod 100."""
    return int.from_bytes(digest(user_id, key), "big") % 100


def published(value):
    """A hash as the upstream file publishes it: rounded to 16 decimal places."""
    return round(value, 16)


def hash_vector(user_id, key, description, rounded=False):
    h = golden_hash(user_id, key)
    return {
        "user_id": user_id,
        "flag_key": key,
        "md5_hex": digest(user_id, key).hex(),
        "expected_hash": published(h) if rounded else h,
        "description": description,
    }


# --- hash-vectors.json ---------------------------------------------------------------------

ALGORITHM = {
    "name": "MD5 consistent hash",
    "steps": [
        "1. Join the user id and the key with one colon: '{userId}:{flagKey}'",
        "2. Encode that string as UTF-8 (no normalisation, no terminator)",
        "3. Take the MD5 digest (16 bytes)",
        "4. Read digest bytes 0..3 as an unsigned 32-bit integer, LITTLE-endian",
        "5. Divide by 2^32 (4294967296); the result lies in [0.0, 1.0)",
    ],
    "divisor": DIVISOR,
}

CORE = [
    ("user-123", "my-flag", "The reference input every SDK checks first"),
    ("alice", "dark-mode", "A low value (about 0.035): inside 5% rollouts, outside 3%"),
    ("bob", "new-checkout", "A value in the lower half"),
    ("user-789", "beta-feature", "A value near the first third"),
    ("test-user", "flag-key", "A value just below 1: outside every rollout under 100%"),
    ("", "empty-user", "An empty user id: the input is just ':empty-user'"),
    ("a", "b", "One character on each side of the separator"),
    ("user-001", "exp-abc", "First of two users in one experiment"),
    ("user-002", "exp-abc", "Second user, same experiment: a different value"),
]

ROLLOUTS = [
    ("alice", "dark-mode", "About 0.035: included from 5% upwards, excluded at 3%"),
    ("test-user", "flag-key", "About 0.992: included only at 100%"),
]


def hash_vectors_file():
    rollout = []
    for user_id, key, description in ROLLOUTS:
        h = golden_hash(user_id, key)
        entry = {"user_id": user_id, "flag_key": key, "expected_hash": published(h)}
        for pct in (3, 5, 50, 100):
            entry["rollout_%d_percent" % pct] = h < pct / 100
        entry["description"] = description
        rollout.append(entry)
    return {
        "description": "Golden vectors for the cross-SDK consistent hash. Every Experimently SDK must "
                       "reproduce each expected_hash within 1e-10 and each rollout decision exactly. "
                       "Values are rounded to 16 decimal places, as the upstream file publishes them.",
        "algorithm": ALGORITHM,
        "hash_vectors": [hash_vector(u, k, d, rounded=True) for u, k, d in CORE],
        "rollout_vectors": rollout,
    }


# --- hash-extended.json --------------------------------------------------------------------

def nfc(s):
    return unicodedata.normalize("NFC", s)


def nfd(s):
    return unicodedata.normalize("NFD", s)


def extreme(prefix, key, count, lowest):
    """The user id `prefix + n` (n < count) whose hash is the lowest (or highest) for `key`."""
    best = None
    for n in range(count):
        user_id = "%s%d" % (prefix, n)
        value = int.from_bytes(digest(user_id, key)[:4], "little")
        if best is None or (value < best[0] if lowest else value > best[0]):
            best = (value, user_id)
    return best[1]


def extended_cases():
    c = []

    def add(category, user_id, key, description):
        c.append((category, user_id, key, description))

    # Non-ASCII ids: composed (NFC) and decomposed (NFD) forms hash differently on purpose.
    add("nfc-nfd", nfc("Jos\u00e9"), "checkout", "Latin small e with acute, precomposed (NFC, U+00E9)")
    add("nfc-nfd", nfd("Jos\u00e9"), "checkout", "The same name decomposed (NFD, e + U+0301): a different input")
    add("nfc-nfd", nfc("M\u00fcller"), "pricing", "u with diaeresis, NFC")
    add("nfc-nfd", nfd("M\u00fcller"), "pricing", "u with diaeresis, NFD")
    add("nfc-nfd", nfc("\u00c5ngstr\u00f6m"), "units", "A with ring and o with diaeresis, NFC")
    add("nfc-nfd", nfd("\u00c5ngstr\u00f6m"), "units", "A with ring and o with diaeresis, NFD")
    add("nfc-nfd", "\u212bngstr\u00f6m", "units", "ANGSTROM SIGN U+212B (NFC maps it to U+00C5): kept as sent")
    add("nfc-nfd", nfc("\ud55c\uad6d\uc5b4"), "lang", "Hangul syllables, NFC")
    add("nfc-nfd", nfd("\ud55c\uad6d\uc5b4"), "lang", "Hangul as conjoining jamo, NFD")
    add("nfc-nfd", "user", nfd("caf\u00e9-flag"), "A decomposed key")
    # Canonically equivalent single spellings as user ids of sdk_contract_ab (issue 11 section 1):
    # each pair is two users with their own bucketing; the scenarios and tests use these.
    add("nfc-nfd", "\u00e9", "sdk_contract_ab", "NFC e-acute U+00E9 alone: bucket 1, control")
    add("nfc-nfd", "e\u0301", "sdk_contract_ab", "NFD e + U+0301: bucket 74, treatment")
    add("nfc-nfd", "\u212b", "sdk_contract_ab", "ANGSTROM SIGN U+212B alone (canonically U+00C5)")
    add("nfc-nfd", "\u00c5", "sdk_contract_ab", "LATIN CAPITAL A WITH RING ABOVE U+00C5 alone")
    add("nfc-nfd", "\ud55c", "sdk_contract_ab", "HANGUL SYLLABLE HAN U+D55C alone")
    add("nfc-nfd", "\u1112\u1161\u11ab", "sdk_contract_ab", "The same syllable as conjoining jamo U+1112 U+1161 U+11AB")
    add("latin-1", "caf\u00e9", "menu", "Encodes differently in Latin-1 (one byte) and UTF-8 (two)")
    add("latin-1", "\u00ff\u00fe", "bom-like", "Bytes that look like a UTF-16 byte order mark in Latin-1")
    add("latin-1", "na\u00efve", "r\u00e9sum\u00e9", "Latin-1 letters on both sides")
    # Emoji: astral code points (4 UTF-8 bytes, a UTF-16 surrogate pair) and sequences.
    add("emoji", "\U0001f600", "smile", "One astral emoji (U+1F600)")
    add("emoji", "user-\U0001f680", "launch", "An emoji inside an id")
    add("emoji", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "family", "A ZWJ sequence of three people")
    add("emoji", "\U0001f44d\U0001f3fd", "thumbs", "Emoji with a skin-tone modifier")
    add("emoji", "\U0001f1ef\U0001f1f5", "flag-\U0001f3f3\ufe0f", "A regional-indicator flag id and a key with a variation selector")
    # CJK
    add("cjk", "\u7528\u6237-42", "\u529f\u80fd\u5f00\u5173", "Chinese id and key")
    add("cjk", "\u30e6\u30fc\u30b6\u30fc", "\u30c0\u30fc\u30af\u30e2\u30fc\u30c9", "Katakana id and key")
    add("cjk", "\uff55\uff53\uff45\uff52", "fullwidth", "Fullwidth Latin letters (not folded to ASCII)")
    add("cjk", "\U00020000", "ext-b", "A CJK Extension B ideograph (astral plane)")
    # Right-to-left text and bidi controls.
    add("rtl", "\u05de\u05e9\u05ea\u05de\u05e9", "\u05d3\u05d2\u05dc", "Hebrew id and key")
    add("rtl", "\u0645\u0633\u062a\u062e\u062f\u0645", "checkout", "Arabic id")
    add("rtl", "\u202euser", "flag", "RIGHT-TO-LEFT OVERRIDE before the id")
    add("rtl", "user\u200f", "flag", "A trailing RIGHT-TO-LEFT MARK")
    # Whitespace and control characters are hashed as they are: no trimming.
    add("whitespace", " user-123", "my-flag", "A leading space")
    add("whitespace", "user-123 ", "my-flag", "A trailing space")
    add("whitespace", "user-123", " my-flag", "A space after the separator")
    add("whitespace", "user\t123", "my-flag", "A tab")
    add("whitespace", "user\n123", "my-flag", "A line feed")
    add("whitespace", "user\r\n123", "my-flag", "CR LF")
    add("whitespace", "user\u00a0123", "my-flag", "NO-BREAK SPACE U+00A0")
    add("whitespace", "user\u3000123", "my-flag", "IDEOGRAPHIC SPACE U+3000")
    add("control", "user\u0000123", "my-flag", "An embedded NUL: C strings would stop here")
    add("control", "\u0000", "\u0000", "NUL on both sides")
    add("control", "user\u001b[31m", "my-flag", "An ANSI escape sequence")
    add("control", "user\u007f", "my-flag", "DEL")
    add("control", "\ufeffuser", "my-flag", "A leading BYTE ORDER MARK U+FEFF, not stripped")
    add("control", "user\u200b", "my-flag", "ZERO WIDTH SPACE")
    # Long inputs: across MD5 block boundaries and far beyond.
    add("long", "u" * 54, "k", "Joined length 56 bytes: the padding needs a second block")
    add("long", "u" * 53, "k", "Joined length 55 bytes: the last one-block message")
    add("long", "u" * 62, "k", "Joined length 64 bytes: exactly one block")
    add("long", "x" * 255, "max-user-id", "A user id of 255 characters, the backend's limit")
    add("long", "user-" + "0123456789" * 100, "long-flag", "A user id of 1005 characters")
    add("long", "\u00e9" * 1000, "accents", "1000 two-byte characters (2000 UTF-8 bytes)")
    add("long", "long-key-user", "k" * 10000, "A key of 10000 characters")
    # The separator inside parts: the joined string is all that is hashed.
    add("separator", "a:b", "c", "A colon in the user id: joins to 'a:b:c'")
    add("separator", "a", "b:c", "A colon in the key: the same joined string, so the same value")
    add("separator", "user-123:my-flag", "", "The whole reference input as the id, empty key")
    add("separator", "", "user-123:my-flag", "Empty id, the reference input as the key")
    add("separator", ":", ":", "Colons only: joins to ':::'")
    add("separator", "user-123", "my-flag:", "A trailing colon in the key")
    add("separator", "user-123|my-flag", "x", "A different separator inside the id does not count")
    add("separator", "user-123", "my-flag\uff1a", "FULLWIDTH COLON U+FF1A is not the separator")
    # Empty parts.
    add("empty", "", "", "Both parts empty: the input is ':'")
    add("empty", "user-123", "", "An empty key")
    add("empty", "", "my-flag", "An empty user id with the reference key")
    # Values near the ends of [0, 1): sign, divisor and rounding mistakes show up here.
    for key in ("edge-low", "edge-high"):
        lowest = key == "edge-low"
        user_id = extreme("edge-user-", key, 50000, lowest)
        add("ends", user_id, key, "The %s value among edge-user-0 .. edge-user-49999 for this key" % ("lowest" if lowest else "highest"))
    for key in ("dark-mode", "my-flag"):
        for lowest in (True, False):
            user_id = extreme("u", key, 50000, lowest)
            add("ends", user_id, key, "The %s value among u0 .. u49999 for '%s'" % ("lowest" if lowest else "highest", key))
    # The first digest byte has its top bit set here, so a signed 32-bit read goes negative.
    add("ends", "signed", "read", "A value above 0.5: a signed 32-bit read would be negative")
    return c


def hash_extended_file():
    vectors = []
    for category, user_id, key, description in extended_cases():
        v = hash_vector(user_id, key, description)
        v["category"] = category
        v["input_utf8_bytes"] = len((user_id + ":" + key).encode("utf-8"))
        vectors.append(v)
    return {
        "description": "More golden hash vectors, where implementations tend to part ways: Unicode "
                       "normalisation, astral characters, right-to-left text, whitespace and control "
                       "characters, long inputs, the separator inside a part, empty parts and values "
                       "near 0 and 1. Ids are hashed exactly as given (no trimming, no normalisation).",
        "algorithm": ALGORITHM,
        "tolerance": 1e-10,
        "hash_vectors": vectors,
    }


# --- bucketing.json ------------------------------------------------------------------------

EXPERIMENTS = [
    ("sdk_contract_ab", [("control", 50, True), ("treatment", 50, False)]),
    ("three-way", [("control", 34, True), ("variant-a", 33, False), ("variant-b", 33, False)]),
    ("small-test", [("control", 10, True), ("treatment", 20, False)]),
    ("all-treatment", [("control", 0, True), ("treatment", 100, False)]),
]

FLAGS = [("sdk_contract_flag", 100), ("half-rollout", 50), ("ten-percent", 10), ("nobody", 0), ("my-flag", 79), ("my-flag-80", 80)]

USERS = ["user-1", "user-2", "bob", "user-123", "alice", "test-user", "user-001", "user-002", "user-789"] + \
    ["user-%d" % n for n in range(3, 25)] + ["Jos\u00e9", "\u7528\u6237-7", "smoke-0f8fa3c2-5d9e-4f3b-9a61-2c1d7e0b4a55"] + \
    ["\u00e9", "e\u0301", "\u212b", "\u00c5", "\ud55c", "\u1112\u1161\u11ab"]   # canonically equivalent pairs


def variant_for(bucket, variants):
    cumulative = 0
    for name, allocation, _ in variants:
        cumulative += allocation
        if bucket < cumulative:
            return name
    return variants[-1][0]


def bucketing_file():
    experiments = [{"key": key, "variants": [{"name": n, "allocation": a, "is_control": c} for n, a, c in variants]}
                   for key, variants in EXPERIMENTS]
    assignments = []
    for key, variants in EXPERIMENTS:
        for user_id in USERS:
            h = golden_hash(user_id, key)
            bucket = int(h * 100)
            assignments.append({"user_id": user_id, "experiment_key": key, "expected_hash": h,
                                "bucket": bucket, "variant": variant_for(bucket, variants)})
    flags = [{"key": key, "rollout_percentage": pct} for key, pct in FLAGS]
    evaluations = []
    for key, pct in FLAGS:
        for user_id in USERS:
            bucket = md5_mod100(user_id, key)
            evaluations.append({"user_id": user_id, "flag_key": key, "md5_hex": digest(user_id, key).hex(),
                                "expected_hash": golden_hash(user_id, key), "md5_mod100": bucket, "enabled": bucket < pct})
    return {
        "description": "Server-side bucketing. Experiments: bucket = floor(hash(user_id, experiment_key) * 100), "
                       "walked over the variants' allocations cumulatively in declared order; the first "
                       "variant with bucket < running sum wins, and the last variant takes what an "
                       "allocation below 100 leaves. Flags (md5-mod100): the whole MD5 of "
                       "'{user_id}:{flag_key}' read as a 128-bit big-endian integer, mod 100; enabled "
                       "when that is below the rollout percentage.",
        "experiments": experiments,
        "assignments": assignments,
        "flags": flags,
        "evaluations": evaluations,
    }


# --- writing -------------------------------------------------------------------------------

FILES = {
    "hash-vectors.json": hash_vectors_file,
    "hash-extended.json": hash_extended_file,
    "bucketing.json": bucketing_file,
}


def render(value):
    # ASCII-only output: every non-ASCII character is a \\u escape, so no editor or tool can
    # normalise the NFC/NFD inputs on the way.
    return (json.dumps(value, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def main(argv):
    check = "--check" in argv[1:]
    unknown = [a for a in argv[1:] if a != "--check"]
    if unknown:
        sys.stderr.write("usage: generate.py [--check]\n")
        return 64
    stale = []
    for name, build in FILES.items():
        path = os.path.join(HERE, name)
        data = render(build())
        if check:
            try:
                with open(path, "rb") as f:
                    current = f.read()
            except OSError as e:
                stale.append("%s: cannot read (%s)" % (name, e.strerror))
                continue
            if current != data:
                stale.append("%s: differs from the generator's output" % name)
        else:
            with open(path, "wb") as f:
                f.write(data)
    if stale:
        for line in stale:
            sys.stderr.write("generate.py --check: " + line + "\n")
        sys.stderr.write("run python3 golden-vectors/generate.py to rewrite them\n")
        return 1
    if check:
        print("generate.py --check: %d files match" % len(FILES))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
