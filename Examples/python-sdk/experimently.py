"""A small Python client of the Experimently contract (CONTRACT.md sections 1, 3, 4 and 5).

Standard library only. Thread-safe: one lock guards the caches, the in-flight requests and the
epoch; no lock is held while a request is on the wire. Time comes from an injectable clock
(`SystemClock` by default; the driver injects a virtual one so TTLs and deadlines follow the
harness's clock).
"""
import math
import http.client
import json
import socket
import struct
import threading
import time
import unicodedata
import urllib.parse
from datetime import datetime, timezone

VERSION = "0.1.0"
BATCH_LIMIT = 100

# A deliberately broken variant, to show the harness catches it out of process too:
# EXPERIMENTLY_EXAMPLE_DEFECT=stale-write-after-clear writes responses that started before a clear;
# EXPERIMENTLY_EXAMPLE_DEFECT=strict-offline-entries ignores persisted entries lacking a field this
# version writes (an assignment without `assigned`, a flag without `config`), as if an app update
# had lost the offline store an earlier version left.
# Identity and event defects an outside tester found the judge passing (each now caught by a
# shipped scenario): nfd-context (attribute names sent in NFD), nfc-variant-names (variant names
# returned in NFC), nfc-event-keys (a keyed event's key sent in NFC), experiment-key-as-flag-key,
# doubled-property-names (an NFC copy of each property name), timestamp-a-millisecond-late,
# drops-keyed-events (never sent, reported sent), reuses-keyed-event-body (the first body of a
# user, name and key sent for every later call), reuses-unkeyed-event-fields (the same for the
# entries of a fan-out), reuses-flag-entry-fields (the same for a fan-out's flag entries only).
# Contract rules a twenty-second outside tester found no scenario enforcing (each now caught by a
# shipped scenario): track-no-deadline (a /track has no deadline of its own), store-key-collides
# (persisted under "ep_sdk_<kind>_<user>_<key>"; its sibling store-key-colon, "ep_sdk:<kind>:<user>:<key>"), no-fallback-4xx (no offline fallback on 400, 403,
# 409, 422), 404-deletes-both-kinds and 404-deletes-user (a 404 deletes more than its entry),
# cache-key-attrs and flight-key-attrs (cache or flight keyed by the attributes too),
# store-ignores-fallback-off, clear-offline-flags-only, clear-offline-clears-memory, lru-on-hit,
# is-control-by-name, assignment-without-variant-name (a sixtieth outside tester: an assignment
# returned without its variant passed `stickiness`),
# query-slash-literal, both-keys-drop-flag, empty-type-as-name, track-only-200, lookup-only-200,
# no-persist-ineligible, trailing-slash (a base URL's trailing "/" kept: "//api/v1/..."),
# hash-nfc and hash-latin1 (the golden hash over NFC-normalized or Latin-1 text),
# evaluate-sends-context (evaluateFlag also sends the attributes as `context`), batch-as-text
# (a /batch body labelled text/plain, which the backend does not read as JSON: 422).
# A twenty-sixth outside tester's Go SDK: missing-assigned-false (an answer or stored entry without
# `assigned` read as not assigned, so never fanned out to). A twenty-ninth outside tester: value-10-digits
# and value-float32 (an event's value cut to 10 significant digits, or sent as a 32-bit float). A thirtieth:
# store-key-casefold (the offline store keys case-folded: another key's entry served), no-fallback-429 and
# ttl-inclusive (an entry still served at exactly stored + cacheTTL). A thirty-first: no-fallback-transport
# (a transport error or timeout thrown where a value is persisted) and nfd-properties (event properties
# sent in NFD, another text than given). A thirty-third: joiner-refetches (a call that joined a
# flight drops the answer when it wakes and fetches again: two requests, two exposures),
# clear-keeps-assignments (clearCache forgets flags only), ignore-ttl (expired entries served). A
# thirty-sixth: store-ignores-user (the offline store keyed by kind and key: another user's entry served).
# A thirty-seventh: interned-flag (the first evaluation of a flag returned to every later caller of it),
# interned-variant (the first assignment object of each variant returned to every later user given it),
# store-first (a value already persisted is returned in place of the call's own fresh answer), no-cache-hit
# (a fresh cache entry is never served: every lookup sends a request, and every assignment another exposure),
# previous-context (a getAssignment without attributes sends the user's previous ones: a stale context).
# A thirty-ninth: batch-stops-after-failure-count (trackBatch stops after a chunk answered 200 with
# failure_count > 0), flight-key-concat (in-flight requests keyed by "user:key": concurrent ("a:b", "c")
# and ("a", "b:c") share one request), fanout-prefix-user (an unkeyed event fans out to every cached
# entry whose user id starts with the event's: user-1's event gets user-10's keys). An outside audit:
# fanout-drops-properties (the entries of a fan-out go without the event's properties). A forty-second:
# retry-failed-lookup (a lookup sent again once after a 5xx or its own deadline, the retry's answer
# returned: a second exposure) and sdk-exposure-track (every getAssignment also sends a `$exposure`
# /track of the SDK's own). A seventieth: flight-key-no-user and flight-key-no-kind (in-flight requests
# keyed without the user, or without the kind: another user's or the other kind's request is joined),
# warm-up-experiments (after an assignment, the same user is assigned to every other experiment asked
# about: exposures no view made), event-variant-id (an event with an experiment key also carries a
# `variant_id` member of the SDK's own, which the event object does not have), assign-sdk-member (the
# assign body also carries an `sdk` member), flights-shared-by-clients (one in-flight table for every
# client of the process: a call joins another client's request), falsy-event-fields (an event field that
# is empty or zero, an experiment key "" say, is left out: Python's `if e.get(name):`). A seventy-second:
# fanout-forgets-on-evict (fan-out reads an index of keys that an eviction empties, where it meant to drop
# the evicted key only: past the cache size an unkeyed event sends nothing though entries are cached).
# A seventy-sixth: resent-without-body (a /track goes out with no body, as an HTTP stack
# following a 307 re-sends a POST on Linux's FoundationNetworking), api-key-static (one API key for the
# process, the last client's: another client's requests carry it, as a static `apiKey` overwritten by a
# second instance). A seventy-ninth: persist-drops-variant-id (the offline store keeps an assignment
# without its variant_id: the fallback serves variant_id null), warm-start (a client's memory cache is
# filled from its offline store at launch: persisted entries served as hits, no request, no exposure) and
# init-wipes-store (the store is emptied at launch, a "migration": the fallback is lost on a relaunch).
# An eighty-second: cache-ttl-static, timeout-static and cache-size-static (the setting is process-wide, the
# last client's: as a static configuration overwritten by a second instance), timer-int32-ms (a cache
# TTL or timeout above 2^31 - 1 milliseconds fires at once, as Node's setTimeout clamps it to 1 ms),
# timer-uint32-ms (the same kept in an unsigned 32-bit count of milliseconds: it wraps), fanout-one-
# entry-per-key (a flag whose key is also a cached experiment's is left out of the fan-out: one set of
# key strings), flag-key-casefold (flag keys case-folded in the cache, as SDKs with case-insensitive
# gate names do), flight-key-casefold (the in-flight table keyed by the case-folded key: concurrent
# lookups of two keys differing in case share one request), hash-strips-id and hash-strips-key (hashUser
# trims the id's, or the key's, surrounding whitespace first). An eighty-fourth, with freedom
# store-snapshot: snapshot-delete-not-written and snapshot-clear-not-written (a 404's delete or
# clearOfflineCache changes the client's copy only: the entry is served again after a relaunch).
# An eighty-sixth: event-name-strip (an event's name and type trimmed), truncate-event-type (cut to the
# backend's 100 characters rather than refused), numeric-user-id (an id of digits sent as a JSON number),
# props-limit-20 (properties past the first 20 dropped), context-lowercase-keys (attribute names
# lower-cased), merge-traits (each assign sends every attribute the user's calls ever gave),
# fanout-event-type-name (a fanned-out entry's type replaced by the event's name), store-ttl-7d
# (persisted entries older than a week not served), store-bounded (the store bounded by cache_size),
# fanout-includes-fallback (an unkeyed event also fans out to keys served from the store),
# batch-drop-invalid (trackBatch drops the events the backend would refuse and sends the rest),
# batch-4xx-true (a /batch answered 4xx reported delivered), chunk-by-bytes (batches also cut at 32 KB)
# and reject-long-user (a user id past 255 UTF-16 units refused locally with invalidConfig).
DEFECT = __import__("os").environ.get("EXPERIMENTLY_EXAMPLE_DEFECT", "")
_INTERNED = {}   # interned-flag, interned-variant: the first value returned, by flag or (experiment, variant)
_LAST_CONTEXT = {}   # previous-context: the attributes a user's last getAssignment gave
_SHARED_FLIGHTS = {}   # flights-shared-by-clients: one in-flight table for every client of the process
_STATIC = {}           # api-key-static, *-static: the setting of the process, set by the last client created
_REUSED = {}   # reuses-keyed-event-body: (user, name, keys) -> the first body sent
_SAVED_AT = {}   # store-ttl-7d: (id of the store's values, kind, user, key) -> when it was persisted
_TRAITS = {}   # merge-traits: every attribute a user's getAssignment calls gave


def _nf(form, v):
    """`v` with every string and member name in Unicode normal form `form` (defects only)."""
    if isinstance(v, str):
        return unicodedata.normalize(form, v)
    if isinstance(v, dict):
        return {unicodedata.normalize(form, k): _nf(form, x) for k, x in v.items()}
    if isinstance(v, list):
        return [_nf(form, x) for x in v]
    return v
# A legal freedom to switch on (the harness must pass it too): "detach-on-clear-offline-cache"
# lets a call after clear_offline_cache() send a request of its own rather than join one in flight;
# "refresh-keeps-position" writes a key fetched again after it expired over its old entry, keeping
# its place in insertion order (as an ordered map does; CONTRACT.md does not say which);
# "non-object-config-undecodable" fails a call whose answer has a `config` or `configuration` that is
# there and no object with decodingError, where the example returns it as null (the contract allows both);
# "evict-newest" evicts, past the cache size, the newest entry but the one just written, where the example
# evicts the oldest (CONTRACT.md names no eviction order).
# "follows-redirects" follows a 3xx answer's Location up to 5 times on the same connection, as Python's
# `requests` does (307 and 308 keep the method and body; 303, and a POST's 301 or 302, become a GET
# without a body), where the example hands the 3xx to its caller (the contract names no redirect).
# "store-snapshot" reads its offline store once, when the client is made, into a copy of its own,
# and writes every change through to the store (as SDKs over localStorage or one file often do): a
# running client does not see what another one writes later (CONTRACT.md section 4 asks for a value
# persisted before a relaunch, not for instances sharing one live store); "store-snapshot-lazy" makes
# that copy at the client's first use of its store rather than when the client is made.
# "store-by-base-url" keeps persisted entries under the client's base URL too (as GrowthBook keys its
# cache by API host and client key): a relaunch talks to the origin its first launch did
# (Documentation/ScenarioFormat.md, `launch`), so it finds them (not combined with store-snapshot).
# "close-lets-finish" makes close() forget the caches and in-flight requests without cancelling them:
# each pending caller gets its own answer when it comes (CONTRACT.md section 5.1), and nothing of it is
# cached or persisted (the example cancels them, each caller ending with `cancelled`; the contract
# does not say which).
FREEDOM = __import__("os").environ.get("EXPERIMENTLY_EXAMPLE_FREEDOM", "")

# What the calling thread works for (set by a driver), recorded with each virtual deadline.
CURRENT = threading.local()

# Set by a driver: called just before the calling thread commits to block until something from
# outside arrives (the result of a shared request it joined, the answer to its own request); returns
# a callable that ends that wait, or None. `_Wait` calls it exactly once: the code that wakes the
# thread from inside this process (a cancel, close, an abort, a flight's result) ends the wait just
# before it wakes the thread, so a driver never counts a woken thread as still waiting; otherwise
# the thread ends it when it goes on. Called with an owner (what `CURRENT.owner` would be) for a
# wait that begins on another thread: a flight's starter waits once the flight has written its
# request, not before (until then it is about to send). driver.py answers `settle` with it
# (Documentation/DriverProtocol.md).
WAIT_HOOK = None


class _Wait:
    """One wait for something from outside, as WAIT_HOOK counts it; `end` is idempotent."""

    def __init__(self, owner=None):
        hook = WAIT_HOOK
        self._end = (hook(owner) if owner is not None else hook()) if hook is not None else None
        self._lock = threading.Lock()

    def end(self):
        with self._lock:
            end, self._end = self._end, None
        if end is not None:
            end()

    @staticmethod
    def none():
        """A wait that counts nothing (the caller that starts a flight waits in `_send`, once its
        request is on the wire: until then it is about to send, not waiting)."""
        w = _Wait.__new__(_Wait)
        w._end, w._lock = None, threading.Lock()
        return w


# URLError codes as the Swift SDK reports them (CONTRACT.md section 3, networkError).
TIMED_OUT = -1001
CANNOT_CONNECT = -1004
CONNECTION_LOST = -1005


class ExperimentationError(Exception):
    """An SDK error: kind is invalidConfig, networkError, decodingError, flagNotFound,
    experimentNotFound, serverError or cancelled; status (serverError, 404s) and code (networkError)."""

    def __init__(self, kind, message="", status=None, code=None):
        super().__init__(message or kind)
        self.kind, self.message, self.status, self.code = kind, message or kind, status, code


class SdkConfig:
    def __init__(self, base_url="http://localhost:8000", api_key="", timeout=10.0, cache_size=1000,
                 cache_ttl=300.0, enable_offline_fallback=True):
        self.base_url, self.api_key, self.timeout = base_url, api_key, timeout
        self.cache_size, self.cache_ttl, self.enable_offline_fallback = cache_size, cache_ttl, enable_offline_fallback


class SystemClock:
    """Wall time; deadlines are the socket timeout."""
    virtual = False

    def now(self):
        return time.time()


class OfflineStore:
    """Persisted successes per (kind, user id, key); shared by clients that name the same store.

    Each entry is the JSON object of the answer it came from (CONTRACT.md section 1: a flag
    `{key, enabled, config}`, an assignment `{experiment_key, user_id, variant_id, variant_name,
    is_control, configuration, assigned}`). `load` reads an entry as the client reads an answer,
    with the same defaults, so an entry an earlier version wrote without a field added later
    (`assigned`, `config`) is still served (`assigned` true, `config` None); an entry that cannot be
    read (no `variant_name`, not an object) is absent. `save_raw` writes an entry exactly as given
    (what an earlier version left; the driver's `seed_store`).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._values = {}

    @staticmethod
    def _k(kind, user, key):
        if DEFECT in ("store-key-collides", "store-key-colon"):
            return ("ep_sdk_%s_%s_%s" if DEFECT == "store-key-collides" else "ep_sdk:%s:%s:%s") % (kind, user, key)
        if DEFECT == "store-key-casefold":   # a file per key on a case-insensitive file system
            return (kind, user, key.casefold())
        if DEFECT == "store-ignores-user":   # keyed by (kind, key) only: another user's entry served
            return (kind, key)
        return (kind, user, key)

    def save(self, kind, user, key, value, bound=None):
        if DEFECT == "persist-drops-variant-id" and isinstance(value, dict) and "variant_id" in value:
            value = dict(value, variant_id=None)   # an older record type without the field
        with self._lock:
            self._values[self._k(kind, user, key)] = value
            if DEFECT == "store-bounded" and bound is not None:   # a store as big as the memory cache
                while len(self._values) > bound:
                    del self._values[next(iter(self._values))]

    def save_raw(self, kind, user, key, value):
        self.save(kind, user, key, value)

    def load(self, kind, user, key):
        with self._lock:
            entry = self._values.get(self._k(kind, user, key))
        if entry is None:
            return None
        if DEFECT == "strict-offline-entries" and isinstance(entry, dict) \
                and not all(f in entry for f in (("key", "enabled", "config") if kind == "flag" else ("assigned", "configuration"))):
            return None
        return _read_entry(entry, kind, user, key)

    def remove(self, kind, user, key):
        with self._lock:
            self._values.pop(self._k(kind, user, key), None)
            if DEFECT == "404-deletes-user":
                for k in [k for k in self._values if isinstance(k, tuple) and k[1] == user]:
                    del self._values[k]

    def clear_all(self):
        with self._lock:
            if DEFECT == "clear-offline-flags-only":
                for k in [k for k in self._values if isinstance(k, tuple) and k[0] == "flag"]:
                    del self._values[k]
                return
            self._values.clear()


def _read_entry(entry, kind, user, key):
    """A persisted entry read as the client reads an answer (OfflineStore.load); None when it cannot be."""
    try:
        return _flag_value(entry, key) if kind == "flag" else _assignment_value(entry, key, user)
    except ExperimentationError:
        return None


class _ScopedStore:
    """Freedom "store-by-base-url": persisted entries kept under the client's base URL as well as
    (kind, user, key), as GrowthBook keys its cache by API host and client key; an entry written
    without a scope (an earlier version's, the driver's `seed_store`) is still read. A relaunch talks
    to the backend it talked to before, so it finds what it persisted."""

    def __init__(self, store, scope):
        self._store, self._scope = store, scope
        self._lock = store._lock

    def _user(self, user):
        return self._scope + "\u0000" + user

    def save(self, kind, user, key, value, bound=None):
        self._store.save(kind, self._user(user), key, value, bound)

    def save_raw(self, kind, user, key, value):
        self._store.save_raw(kind, user, key, value)

    def load(self, kind, user, key):
        value = self._store.load(kind, self._user(user), key)
        return value if value is not None else self._store.load(kind, user, key)

    def remove(self, kind, user, key):
        self._store.remove(kind, self._user(user), key)
        self._store.remove(kind, user, key)

    def clear_all(self):
        self._store.clear_all()


class _SnapshotStore:
    """Freedoms "store-snapshot" and "store-snapshot-lazy": a client's own copy of its offline store,
    read when the client is made (or, lazily, at its first use of the store); `save`, `remove` and
    `clear_all` change the copy and write through to the store (defects snapshot-delete-not-written
    and snapshot-clear-not-written keep a delete or a clear in the copy: the entry comes back at the
    next launch)."""

    def __init__(self, store, lazy=False):
        self._store = store
        self._lock = threading.Lock()
        self._values = None if lazy else self._read()

    def _read(self):
        with self._store._lock:
            return dict(self._store._values)

    def _copy(self):
        """The copy, read now if it has not been (called with `_lock` held)."""
        if self._values is None:
            self._values = self._read()
        return self._values

    def save(self, kind, user, key, value):
        with self._lock:
            self._copy()
        self._store.save(kind, user, key, value)
        with self._lock:
            self._copy()[self._store._k(kind, user, key)] = value

    def save_raw(self, kind, user, key, value):
        self.save(kind, user, key, value)

    def load(self, kind, user, key):
        with self._lock:
            entry = self._copy().get(self._store._k(kind, user, key))
        return None if entry is None else _read_entry(entry, kind, user, key)

    def remove(self, kind, user, key):
        with self._lock:
            self._copy()
        if DEFECT != "snapshot-delete-not-written":
            self._store.remove(kind, user, key)
        with self._lock:
            self._copy().pop(self._store._k(kind, user, key), None)

    def clear_all(self):
        if DEFECT != "snapshot-clear-not-written":
            self._store.clear_all()
        with self._lock:
            self._values = {}


def _quote(text, query=False):
    # Only RFC 3986 unreserved characters stay literal (CONTRACT.md section 1).
    return urllib.parse.quote(text, safe="/" if query and DEFECT == "query-slash-literal" else "")


def _timestamp(seconds):
    # ISO-8601 UTC with milliseconds and Z (CONTRACT.md section 1), the instant floored to the
    # millisecond, by arithmetic (proleptic Gregorian, H. Hinnant's civil_from_days): datetime
    # stops at year 9999, and rounding the milliseconds apart from the seconds sent
    # 1700000000.9996 as ...:20.000Z.
    millis = math.floor(seconds * 1000)
    days, ms = divmod(millis, 86400000)
    z = days + 719468
    era = z // 146097   # Python's // floors already (the C form subtracts 146096 first)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    y = yoe + era * 400 + (1 if m <= 2 else 0)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (y, m, d, ms // 3600000, ms // 60000 % 60, ms // 1000 % 60, ms % 1000)


class Flight:
    """One request shared by every concurrent caller for the same (kind, user, key)."""

    def __init__(self, epoch):
        self.epoch = epoch
        # result: ("ok", value) or ("error", ExperimentationError), set before the waiters wake.
        self.result = None
        self.waiters = {}           # waiter id -> Waiter
        self.connection = None      # the live HTTP connection, to abort on cancel/close/deadline
        self.aborted = None         # why the connection was aborted: "cancelled" or "timeout"
        self.starter = None         # (Waiter, owner): its wait is counted once the request is written


class Waiter:
    """One caller waiting on a flight."""

    def __init__(self, ident):
        self.id = ident
        self.event = threading.Event()
        self.cancelled = False
        self.wait = None            # its _Wait, set when it registers


class ExperimentationClient:
    def __init__(self, config, offline_store=None, clock=None):
        self.config = config
        _STATIC["api_key"] = config.api_key
        _STATIC["cache_ttl"], _STATIC["timeout"], _STATIC["cache_size"] = config.cache_ttl, config.timeout, config.cache_size
        self.store = offline_store if config.enable_offline_fallback or DEFECT == "store-ignores-fallback-off" else None
        if self.store is not None and FREEDOM == "store-by-base-url":
            self.store = _ScopedStore(self.store, config.base_url.rstrip("/"))
        if self.store is not None and FREEDOM in ("store-snapshot", "store-snapshot-lazy"):
            self.store = _SnapshotStore(self.store, lazy=FREEDOM == "store-snapshot-lazy")
        self.clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._caches = {"flag": {}, "experiment": {}}   # (user, key) -> (value, expires_at); insertion order
        self._flights = _SHARED_FLIGHTS if DEFECT == "flights-shared-by-clients" else {}
        self._fan_index = {"flag": set(), "experiment": set()}   # fanout-forgets-on-evict only
        self._tracking = set()      # live connections of tracking requests, aborted by close()
        self._epoch = 0
        self._next_waiter = 0
        if self.store is not None and DEFECT in ("warm-start", "init-wipes-store"):
            with self.store._lock:
                if DEFECT == "init-wipes-store":     # a "migration" at launch
                    self.store._values.clear()
                else:                                # persisted entries preloaded as fresh cache hits
                    now = self.clock.now()
                    for k, value in self.store._values.items():
                        if isinstance(k, tuple) and len(k) == 3 and isinstance(value, dict):
                            self._caches["flag" if k[0] == "flag" else "experiment"][(k[1], k[2])] = (value, now + self.config.cache_ttl)

    def _setting(self, name):
        """The client's `cache_ttl`, `timeout` or `cache_size`, as the defects read it."""
        value = _STATIC[name] if DEFECT == name.replace("_", "-") + "-static" else getattr(self.config, name)
        if name != "cache_size" and DEFECT in ("timer-int32-ms", "timer-uint32-ms"):
            ms = int(value * 1000)
            if DEFECT == "timer-int32-ms" and ms > 2**31 - 1:
                value = 0.001
            elif DEFECT == "timer-uint32-ms":
                value = (ms % 2**32) / 1000.0
        return value

    # -- HTTP (CONTRACT.md section 1) --

    def _send(self, method, path, query=None, body=None, flight=None):
        try:
            parsed = urllib.parse.urlsplit(self.config.base_url if DEFECT == "trailing-slash" else self.config.base_url.rstrip("/"))
            port = parsed.port   # raises ValueError for a port that is no number
        except ValueError:
            parsed, port = None, None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ExperimentationError("invalidConfig", "cannot form a URL from %r" % self.config.base_url)
        target = (parsed.path or "") + path
        if query:
            target += "?" + "&".join("%s=%s" % (_quote(k, True), _quote(v, True)) for k, v in sorted(query))
        timeout = None if getattr(self.clock, "virtual", False) else self._setting("timeout")
        cls = http.client.HTTPSConnection if parsed.scheme == "https" else http.client.HTTPConnection
        conn = cls(parsed.hostname, port, timeout=timeout)
        deadline = None
        if flight is not None:
            with self._lock:
                flight.connection = conn
                if flight.aborted:
                    raise self._aborted(flight)
        else:
            with self._lock:
                self._tracking.add(conn)
        if getattr(self.clock, "virtual", False) and not (DEFECT == "track-no-deadline" and path == "/api/v1/tracking/track"):
            deadline = self.clock.add_deadline(self._setting("timeout"), lambda: self._abort(flight, conn, "timeout"),
                                               owner=flight if flight is not None else getattr(CURRENT, "owner", None))
        key = _STATIC["api_key"] if DEFECT == "api-key-static" else self.config.api_key
        headers = {"X-API-Key": key, "Accept": "application/json", "Content-Type": "application/json"}
        if DEFECT == "batch-as-text" and path == "/api/v1/tracking/batch":
            headers["Content-Type"] = "text/plain"
        if DEFECT == "resent-without-body" and path == "/api/v1/tracking/track":
            body = None   # as a stack following a 307 without its body does
        try:
            conn.request(method, target, body=body, headers=headers)
            if flight is not None:
                # The flight's starter waits from now, counted for its own operation; a cancel
                # (cancel_waiter) ends it as any waiter's.
                with self._lock:
                    starter, flight.starter = flight.starter, None
                    if starter is not None and starter[0].id in flight.waiters:
                        starter[0].wait = _Wait(starter[1])
            response, data = self._answer(conn)
            hops = 0
            while FREEDOM == "follows-redirects" and response.status in (301, 302, 303, 307, 308) \
                    and response.getheader("Location") and hops < 5:
                # As `requests` does: 307 and 308 keep the method and body; 303 (and a POST's 301
                # or 302) become a GET without a body (RFC 9110 sections 15.4.2 to 15.4.9).
                hops += 1
                moved = urllib.parse.urlsplit(urllib.parse.urljoin("http://h" + target, response.getheader("Location")))
                target = moved.path + ("?" + moved.query if moved.query else "")
                if response.status in (301, 302, 303) and method != "GET":
                    method, body = "GET", None
                conn.request(method, target, body=body, headers=headers)
                response, data = self._answer(conn)
            return response.status, data
        except socket.timeout:
            raise ExperimentationError("networkError", "The request timed out.", code=TIMED_OUT)
        except ConnectionRefusedError as e:
            raise ExperimentationError("networkError", str(e), code=CANNOT_CONNECT)
        except (OSError, http.client.HTTPException) as e:
            if flight is not None and flight.aborted:
                raise self._aborted(flight)
            if deadline is not None and deadline.fired:
                raise ExperimentationError("networkError", "The request timed out.", code=TIMED_OUT)
            raise ExperimentationError("networkError", "The network connection was lost. (%s)" % type(e).__name__,
                                       code=CONNECTION_LOST)
        finally:
            if deadline is not None:
                self.clock.remove_deadline(deadline)
            with self._lock:
                self._tracking.discard(conn)
            conn.close()

    @staticmethod
    def _answer(conn):
        """The response to the request just sent on `conn` and its body, waited for as `settle` sees it."""
        wait = conn.settle_wait = _Wait()
        try:
            response = conn.getresponse()
        finally:
            wait.end()
        return response, response.read()

    def _retrying(self, send, flight):
        """`send()`; with the defect `retry-failed-lookup`, once more after a 5xx or the SDK's own
        deadline (CONTRACT.md section 4 has no retry: PostHog/posthog-js PR #260)."""
        if DEFECT != "retry-failed-lookup":
            return send()
        try:
            status, body = send()
        except ExperimentationError as e:
            if e.kind != "networkError" or flight is None:
                raise
            with self._lock:
                if flight.aborted != "timeout":
                    raise
                flight.aborted = None
            return send()
        return send() if status >= 500 else (status, body)

    @staticmethod
    def _aborted(flight):
        if flight.aborted == "timeout":
            return ExperimentationError("networkError", "The request timed out.", code=TIMED_OUT)
        return ExperimentationError("cancelled", "The operation was cancelled.")

    def _abort(self, flight, conn, why):
        if flight is not None:
            with self._lock:
                if flight.aborted is None:
                    flight.aborted = why
        wait = getattr(conn, "settle_wait", None)
        if wait is not None:
            wait.end()
        try:
            if conn.sock is not None:
                conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- single flight, cache, fallback (CONTRACT.md sections 4 and 5) --

    def _shared(self, kind, user_id, key, fetch, waiter_box=None, attributes=None):
        ck = (user_id, key) + ((json.dumps(attributes, sort_keys=True),) if DEFECT == "cache-key-attrs" else ())
        if DEFECT == "flag-key-casefold" and kind == "flag":
            ck = (user_id, key.casefold())
        fk = (kind, ck) + ((json.dumps(attributes, sort_keys=True),) if DEFECT == "flight-key-attrs" else ())
        if DEFECT == "flight-key-casefold":
            fk = (kind, (user_id, key.casefold()))
        if DEFECT == "flight-key-concat":
            fk = (kind, "%s:%s" % ck)
        if DEFECT == "flight-key-no-user":
            fk = (kind, key)
        if DEFECT == "flight-key-no-kind":
            fk = ck
        now = self.clock.now()
        with self._lock:
            entry = self._caches[kind].get(ck)
            if entry is not None and DEFECT != "no-cache-hit":
                if now < entry[1] or (DEFECT == "ttl-inclusive" and now == entry[1]) or DEFECT == "ignore-ttl":
                    if DEFECT == "lru-on-hit":
                        del self._caches[kind][ck]
                        self._caches[kind][ck] = entry
                    return entry[0]
                if FREEDOM != "refresh-keeps-position":
                    del self._caches[kind][ck]
            self._next_waiter += 1
            waiter = Waiter(self._next_waiter)
            flight = self._flights.get(fk)
            start = flight is None
            if start:
                flight = Flight(self._epoch)
                self._flights[fk] = flight
            flight.waiters[waiter.id] = waiter
            # A joiner waits from here (counted under the lock, so that a waker always finds it
            # to end). The starter waits once its request is on the wire: the flight's thread works
            # for it, and `_send` counts that wait (DriverProtocol.md, settle: an operation about
            # to send is not settled; a seventeenth outside tester).
            if start:
                waiter.wait = _Wait.none()
                flight.starter = (waiter, getattr(CURRENT, "owner", None))
            else:
                waiter.wait = _Wait()
            if waiter_box is not None:
                waiter_box.append((self, flight, waiter))
        if start:
            threading.Thread(target=self._run_flight, args=(kind, ck, flight, fetch, fk), daemon=True).start()
        try:
            waiter.event.wait()
        finally:
            waiter.wait.end()
        if waiter.cancelled:
            raise ExperimentationError("cancelled", "The operation was cancelled.")
        if DEFECT == "joiner-refetches" and not start and not getattr(CURRENT, "refetching", False):
            CURRENT.refetching = True
            try:
                with self._lock:
                    self._caches[kind].pop(ck, None)
                return self._shared(kind, user_id, key, fetch, None, attributes)
            finally:
                CURRENT.refetching = False
        status, value = flight.result
        if status == "error":
            raise value
        return value

    def cancel_waiter(self, flight, waiter):
        """Cancels one caller (CONTRACT.md section 5.3); the request is aborted when no caller is left."""
        with self._lock:
            if flight.waiters.pop(waiter.id, None) is None:
                return
            waiter.cancelled = True
            waiter.wait.end()
            last = not flight.waiters
            if last:
                for k, f in list(self._flights.items()):
                    if f is flight:
                        del self._flights[k]
                if flight.aborted is None:
                    flight.aborted = "cancelled"
            conn = flight.connection
        waiter.event.set()
        if last and conn is not None:
            self._abort(flight, conn, "cancelled")

    def _run_flight(self, kind, ck, flight, fetch, fk):
        user_id, key = ck[0], ck[1]
        try:
            outcome = ("ok", fetch(flight))
        except ExperimentationError as e:
            outcome = ("error", e)
        except Exception as e:  # a bug in this client, reported rather than lost
            outcome = ("error", ExperimentationError("networkError", repr(e), code=-1))
        now = self.clock.now()
        with self._lock:
            if self._flights.get(fk) is flight:      # section 5.2
                del self._flights[fk]
            current = flight.epoch == self._epoch or DEFECT == "stale-write-after-clear"   # section 5.1
            status, value = outcome
            persisted_first = self.store.load(kind, user_id, key) if DEFECT == "store-first" and status == "ok" and self.store is not None else None
            if status == "ok":
                if current:
                    cache = self._caches[kind]
                    if FREEDOM != "refresh-keeps-position":
                        cache.pop(ck, None)
                    cache[ck] = (value, now + self._setting("cache_ttl"))
                    evicted = False
                    while len(cache) > max(1, self._setting("cache_size")):
                        # The contract names no eviction order: oldest first, or (a freedom) the
                        # newest entry but the one just written.
                        newest = [k for k in cache if k != ck][-1] if FREEDOM == "evict-newest" else None
                        del cache[newest if newest is not None else next(iter(cache))]
                        evicted = True
                    if DEFECT == "fanout-forgets-on-evict":   # meant: drop the evicted key from the index
                        self._fan_index[kind] = set() if evicted else self._fan_index[kind] | {ck}
                    if self.store is not None and not (DEFECT == "no-persist-ineligible" and value.get("assigned") is False):
                        if DEFECT == "store-bounded":
                            self.store.save(kind, user_id, key, value, bound=max(1, self._setting("cache_size")))
                        else:
                            self.store.save(kind, user_id, key, value)
                        _SAVED_AT[(id(getattr(self.store, "_store", self.store)), kind, user_id, key)] = now
                result = outcome if persisted_first is None else ("ok", persisted_first)
            elif value.kind in ("flagNotFound", "experimentNotFound"):
                if self.store is not None:
                    self.store.remove(kind, user_id, key)
                    if DEFECT == "404-deletes-both-kinds":
                        self.store.remove("flag" if kind == "experiment" else "experiment", user_id, key)
                result = outcome
            elif DEFECT == "no-fallback-transport" and value.kind in ("networkError", "timeout"):
                result = outcome
            elif DEFECT == "no-fallback-429" and value.kind == "serverError" and value.status == 429:
                result = outcome
            elif DEFECT == "no-fallback-4xx" and value.kind == "serverError" and value.status in (400, 403, 409, 422):
                result = outcome
            elif DEFECT == "store-ttl-7d" and self.store is not None \
                    and now - _SAVED_AT.get((id(getattr(self.store, "_store", self.store)), kind, user_id, key), now) >= 7 * 86400:
                result = outcome   # persisted entries expire after a week
            elif value.kind not in ("cancelled", "invalidConfig") and self.store is not None \
                    and self.store.load(kind, user_id, key) is not None:
                result = ("ok", self.store.load(kind, user_id, key))
                if DEFECT == "fanout-includes-fallback" and current:   # the served key counted in the fan-out
                    self.__dict__.setdefault("_served", []).append((kind, user_id, key))
            else:
                result = outcome
            flight.result = result
            waiters = list(flight.waiters.values())
            flight.waiters.clear()
        for w in waiters:
            w.wait.end()
            w.event.set()

    def evaluate_flag(self, flag_key, user_id, attributes=None, waiter_box=None):
        _check_user_length(user_id)
        def fetch(flight):
            query = [("user_id", user_id)]
            if DEFECT == "evaluate-sends-context" and attributes is not None:
                query.append(("context", json.dumps(attributes, separators=(",", ":"))))
            status, body = self._retrying(lambda: self._send("GET", "/api/v1/feature-flags/evaluate/" + _quote(flag_key), query, flight=flight), flight)
            if status == 404:
                raise ExperimentationError("flagNotFound", "Flag not found: %s" % flag_key, status=404)
            if not 200 <= status < 300 or (DEFECT == "lookup-only-200" and status != 200):
                raise ExperimentationError("serverError", body.decode("utf-8", "replace"), status=status)
            return _flag_value(_decode_object(body), flag_key)
        value = self._shared("flag", user_id, flag_key, fetch, waiter_box, attributes)
        if DEFECT == "interned-flag" and isinstance(value, dict):
            with self._lock:
                value = _INTERNED.setdefault(("flag", flag_key), value)
        return value

    def get_assignment(self, experiment_key, user_id, attributes=None, waiter_box=None, _warming=False):
        _check_user_length(user_id)
        if DEFECT == "previous-context":
            with self._lock:
                if attributes is None:
                    attributes = _LAST_CONTEXT.get(user_id)
                else:
                    _LAST_CONTEXT[user_id] = attributes

        def fetch(flight):
            fields = {"experiment_key": experiment_key, "user_id": int(user_id) if DEFECT == "numeric-user-id" and user_id.isdigit() else user_id}
            if DEFECT == "assign-sdk-member":   # a member of the SDK's own in the assign body
                fields["sdk"] = "python-example"
            if attributes is not None:
                fields["context"] = _nf("NFD", attributes) if DEFECT == "nfd-context" else attributes
                if DEFECT == "context-lowercase-keys":
                    fields["context"] = {k.lower(): v for k, v in attributes.items()}
                if DEFECT == "merge-traits":
                    with self._lock:
                        fields["context"] = _TRAITS[user_id] = dict(_TRAITS.get(user_id, {}), **attributes)
            status, body = self._retrying(lambda: self._send("POST", "/api/v1/tracking/assign", body=_encode(fields), flight=flight), flight)
            if status == 404:
                raise ExperimentationError("experimentNotFound", "Experiment not found: %s" % experiment_key, status=404)
            if not 200 <= status < 300 or (DEFECT == "lookup-only-200" and status != 200):
                raise ExperimentationError("serverError", body.decode("utf-8", "replace"), status=status)
            return _assignment_value(_decode_object(body), experiment_key, user_id)
        value = self._shared("experiment", user_id, experiment_key, fetch, waiter_box, attributes)
        if DEFECT == "warm-up-experiments" and not _warming:   # "initialize for a user": every experiment asked about, for this user too
            with self._lock:
                asked = self.__dict__.setdefault("_asked", [])
                if experiment_key not in asked:
                    asked.append(experiment_key)
                others = [k for k in asked if k != experiment_key]
            for other in others:
                try:
                    self.get_assignment(other, user_id, _warming=True)
                except ExperimentationError:
                    pass
        if DEFECT == "sdk-exposure-track":   # an exposure /track of the SDK's own per lookup (Flagsmith python client #233)
            try:
                self._send("POST", "/api/v1/tracking/track", body=_encode({"event_type": "$exposure", "event_name": "$exposure",
                           "user_id": user_id, "experiment_key": experiment_key, "metadata": {"variant": value.get("variant_name")}}))
            except ExperimentationError:
                pass
        if DEFECT == "interned-variant" and isinstance(value, dict):
            with self._lock:
                value = _INTERNED.setdefault(("experiment", experiment_key, value.get("variant_name")), value)
        return value

    # -- tracking (CONTRACT.md section 4; section 5.4 and 5.5) --

    def _event_json(self, e):
        # eventType ?? eventName (CONTRACT.md section 1): an empty type is a type, sent as given.
        o = {"event_type": e["event_name"] if e.get("event_type") is None else e["event_type"], "event_name": e["event_name"], "user_id": e["user_id"]}
        if DEFECT == "empty-type-as-name":
            o["event_type"] = e.get("event_type") or e["event_name"]
        for wire, name in (("experiment_key", "experiment_key"), ("feature_flag_key", "feature_flag_key"), ("value", "value"),
                           ("metadata", "properties")):
            if e.get(name) is not None and (e[name] or DEFECT != "falsy-event-fields"):
                o[wire] = e[name]
        if e.get("timestamp") is not None:
            o["timestamp"] = _timestamp(e["timestamp"] + (0.001 if DEFECT == "timestamp-a-millisecond-late" else 0))
        if DEFECT == "nfc-event-keys":
            for f in ("experiment_key", "feature_flag_key"):
                if f in o:
                    o[f] = _nf("NFC", o[f])
        if DEFECT == "both-keys-drop-flag" and "experiment_key" in o:
            o.pop("feature_flag_key", None)
        if DEFECT == "experiment-key-as-flag-key" and "experiment_key" in o:
            o["feature_flag_key"] = o.pop("experiment_key")
        if DEFECT == "value-10-digits" and isinstance(o.get("value"), float):
            o["value"] = float("%.10g" % o["value"])
        if DEFECT == "value-float32" and isinstance(o.get("value"), float) and abs(o["value"]) < 3e38:
            o["value"] = struct.unpack("f", struct.pack("f", o["value"]))[0]
        if DEFECT == "nfd-properties" and isinstance(o.get("metadata"), dict):
            o["metadata"] = _nf("NFD", o["metadata"])
        if DEFECT == "doubled-property-names" and isinstance(o.get("metadata"), dict):
            o["metadata"] = dict(o["metadata"], **{_nf("NFC", k): v for k, v in o["metadata"].items()})
        if DEFECT == "event-variant-id" and "experiment_key" in o:   # a member of the SDK's own
            o["variant_id"] = "v-" + o["experiment_key"]
        if DEFECT == "event-name-strip":
            o["event_name"], o["event_type"] = o["event_name"].strip(), o["event_type"].strip()
        if DEFECT == "truncate-event-type":   # cut to the backend's limit rather than refused
            o["event_name"], o["event_type"] = o["event_name"][:100], o["event_type"][:100]
        if DEFECT == "props-limit-20" and isinstance(o.get("metadata"), dict):
            o["metadata"] = dict(list(o["metadata"].items())[:20])
        if DEFECT == "numeric-user-id" and o["user_id"].isdigit():
            o["user_id"] = int(o["user_id"])
        return o

    def _fan_out(self, event):
        now = self.clock.now()
        with self._lock:
            def mine(u):
                return u.startswith(event["user_id"]) if DEFECT == "fanout-prefix-user" else u == event["user_id"]
            def indexed(kind, ck):
                return DEFECT != "fanout-forgets-on-evict" or ck in self._fan_index[kind]
            assignments = [ck[1] for ck, (v, exp) in self._caches["experiment"].items()
                           if mine(ck[0]) and now < exp and v.get("assigned", True) and indexed("experiment", ck)]
            flags = [ck[1] for ck, (v, exp) in self._caches["flag"].items() if mine(ck[0]) and now < exp and indexed("flag", ck)]
            if DEFECT == "fanout-one-entry-per-key":
                flags = [k for k in flags if k not in assignments]
            for kind, user, key in self.__dict__.get("_served", []):
                keys = assignments if kind == "experiment" else flags
                if user == event["user_id"] and key not in keys:
                    keys.append(key)
        if DEFECT == "fanout-drops-properties":
            event = dict(event, properties=None)
        if DEFECT == "fanout-event-type-name":
            event = dict(event, event_type=None)
        out = []
        for k in assignments:
            e = dict(event, experiment_key=k, feature_flag_key=None)
            out.append(e)
        for k in flags:
            e = dict(event, experiment_key=None, feature_flag_key=k)
            out.append(e)
        return out

    @staticmethod
    def _keyed(e):
        return e.get("experiment_key") is not None or e.get("feature_flag_key") is not None

    def track_with_status(self, event):
        if self._keyed(event) and DEFECT == "drops-keyed-events":
            return True
        if self._keyed(event):
            try:
                body = _encode(self._event_json(event))
                if DEFECT == "reuses-keyed-event-body":
                    key = (event.get("user_id"), event.get("event_name"), event.get("experiment_key"), event.get("feature_flag_key"))
                    with self._lock:
                        body = _REUSED.setdefault(key, body)
                status, _ = self._send("POST", "/api/v1/tracking/track", body=body)
                if DEFECT == "keyed-event-twice":   # a broken variant for the harness's tests
                    status, _ = self._send("POST", "/api/v1/tracking/track", body=_encode(self._event_json(event)))
            except ExperimentationError:
                return False
            return status == 200 if DEFECT == "track-only-200" else 200 <= status < 300
        return self._send_batches(self._fan_out(event))

    def track(self, event):
        self.track_with_status(event)

    def track_batch(self, events):
        flat = []
        for e in events:
            flat.extend([e] if self._keyed(e) else self._fan_out(e))
        return self._send_batches(flat)

    def _batch_json(self, e):
        o = self._event_json(e)
        if DEFECT == "reuses-unkeyed-event-fields" or (DEFECT == "reuses-flag-entry-fields" and e.get("feature_flag_key") is not None):
            key = (e.get("user_id"), e.get("event_name"), e.get("experiment_key"), e.get("feature_flag_key"))
            with self._lock:
                o = _REUSED.setdefault(key, o)
        return o

    def _chunks(self, events):
        if DEFECT == "chunk-by-bytes":   # also cut at 32 KB of body, as some analytics SDKs do
            chunk, size = [], 0
            for e in events:
                n = len(_encode(self._event_json(e)))
                if chunk and (len(chunk) >= BATCH_LIMIT or size + n > 32768):
                    yield chunk
                    chunk, size = [], 0
                chunk.append(e)
                size += n
            if chunk:
                yield chunk
            return
        for start in range(0, len(events), BATCH_LIMIT):
            yield events[start:start + BATCH_LIMIT]

    def _send_batches(self, events):
        ok = True
        if DEFECT == "batch-drop-invalid":   # what the backend would refuse is dropped, the rest sent
            events = [e for e in events if 1 <= len(e["event_name"] if e.get("event_type") is None else e["event_type"]) <= 100
                      and 1 <= len(e.get("user_id") or "") <= 255]
        for chunk in self._chunks(events):
            try:
                status, body = self._send("POST", "/api/v1/tracking/batch",
                                          body=_encode({"events": [self._batch_json(e) for e in chunk]}))
            except ExperimentationError:
                ok = False
                continue
            if not 200 <= status < 300 and not (DEFECT == "batch-4xx-true" and 400 <= status < 500):
                ok = False
                continue
            try:
                summary = json.loads(body)
                if isinstance(summary, dict) and isinstance(summary.get("failure_count"), (int, float)) \
                        and summary["failure_count"] > 0:
                    ok = False
                    if DEFECT == "batch-stops-after-failure-count":
                        break
            except ValueError:
                pass
        return ok

    # -- cache access --

    def get_assignments(self, user_id):
        now = self.clock.now()
        with self._lock:
            return [v for (u, _, *_), (v, exp) in self._caches["experiment"].items() if u == user_id and now < exp]

    def get_evaluated_flags(self, user_id):
        now = self.clock.now()
        with self._lock:
            return [k for (u, k, *_), (_, exp) in self._caches["flag"].items() if u == user_id and now < exp]

    def clear_cache(self):
        with self._lock:
            self._detach()

    def clear_offline_cache(self):
        with self._lock:
            self._epoch += 1
            if self.store is not None:
                self.store.clear_all()
            if DEFECT == "clear-offline-clears-memory":
                self._caches = {"flag": {}, "experiment": {}}
            if FREEDOM == "detach-on-clear-offline-cache":
                self._flights = {}

    def close(self):
        with self._lock:
            flights = list(self._flights.values())
            tracking = list(self._tracking)
            self._detach()
        if FREEDOM == "close-lets-finish":
            return
        # Tracking requests in flight are cancelled too (CONTRACT.md section 5: close cancels every
        # request): their callers report failure (trackWithStatus false), never a silent success.
        for conn in tracking:
            self._abort(None, conn, "cancelled")
        for f in flights:
            with self._lock:
                f.aborted = f.aborted or "cancelled"
                conn = f.connection
                waiters = list(f.waiters.values())
                f.waiters.clear()
            for w in waiters:
                w.cancelled = True
                w.wait.end()
                w.event.set()
            if conn is not None:
                self._abort(f, conn, "cancelled")

    def _detach(self):
        self._epoch += 1
        self._caches = {"flag": {}, "experiment": self._caches["experiment"] if DEFECT == "clear-keeps-assignments" else {}}
        self._flights = {}
        self._fan_index = {"flag": set(), "experiment": set()}


def hash_user(user_id, flag_key):
    """CONTRACT.md section 6: LE uint32 of the first 4 bytes of MD5("{u}:{k}") / 2^32."""
    import hashlib
    if DEFECT == "hash-strips-id":
        user_id = user_id.strip()
    if DEFECT == "hash-strips-key":
        flag_key = flag_key.strip()
    text = "%s:%s" % (user_id, flag_key)
    if DEFECT == "hash-nfc":
        text = unicodedata.normalize("NFC", text)
    digest = hashlib.md5(text.encode("latin-1", "replace") if DEFECT == "hash-latin1" else text.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "little") / 4294967296.0


def _check_user_length(user_id):
    """Defect reject-long-user: a user id longer than 255 UTF-16 units (JavaScript's `length`)
    refused locally, where the backend counts code points and answers 422 past 255."""
    if DEFECT == "reject-long-user" and len(user_id.encode("utf-16-le")) // 2 > 255:
        raise ExperimentationError("invalidConfig", "user id longer than 255 characters")


def _encode(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _flag_value(o, flag_key):
    """A flag answer (or persisted entry) as the client returns it; a missing `enabled` is false,
    a missing or non-object `config` None."""
    if not isinstance(o, dict):
        raise ExperimentationError("decodingError", "a flag is a JSON object")
    k = o.get("key")
    enabled = o.get("enabled", False)
    if (k is not None and not isinstance(k, str)) or not isinstance(enabled, bool):
        raise ExperimentationError("decodingError", "unexpected flag fields")
    config = o.get("config")
    if FREEDOM == "non-object-config-undecodable" and config is not None and not isinstance(config, dict):
        raise ExperimentationError("decodingError", "config is not an object")
    return {"key": k or flag_key, "enabled": enabled, "config": config if isinstance(config, dict) else None}


def _assignment_value(o, experiment_key, user_id):
    """An assignment answer (or persisted entry) as the client returns it; `experiment_key` and
    `variant_name` are required, a missing `is_control` is false, a missing `assigned` true."""
    if not isinstance(o, dict):
        raise ExperimentationError("decodingError", "an assignment is a JSON object")
    ek, name = o.get("experiment_key"), o.get("variant_name")
    if not isinstance(ek, str) or not isinstance(name, str):
        raise ExperimentationError("decodingError", "experiment_key and variant_name are required")
    uid, vid, config = o.get("user_id"), o.get("variant_id"), o.get("configuration")
    if FREEDOM == "non-object-config-undecodable" and config is not None and not isinstance(config, dict):
        raise ExperimentationError("decodingError", "configuration is not an object")
    is_control, assigned = o.get("is_control", False), o.get("assigned", DEFECT != "missing-assigned-false")
    if DEFECT == "is-control-by-name":
        is_control = name == "control"
    if DEFECT == "nfc-variant-names":
        name = unicodedata.normalize("NFC", name)
    assignment = {"experiment_key": ek or experiment_key, "user_id": uid if isinstance(uid, str) and uid else user_id,
                  "variant_id": vid if isinstance(vid, str) else None, "variant_name": name,
                  "is_control": is_control if isinstance(is_control, bool) else False,
                  "configuration": config if isinstance(config, dict) else None,
                  "assigned": assigned if isinstance(assigned, bool) else True}
    if DEFECT == "assignment-without-variant-name":
        del assignment["variant_name"]
    return assignment


def _decode_object(body):
    try:
        o = json.loads(body)
    except ValueError as e:
        raise ExperimentationError("decodingError", "undecodable body: %s" % e)
    if not isinstance(o, dict):
        raise ExperimentationError("decodingError", "the body is not a JSON object")
    return o
