/// One plausible defect that real SDKs have shipped; each is a broken variant of the SDK that the
/// shipped scenario suite must catch (the harness proving itself).
public enum Defect: String, CaseIterable, Sendable, Codable {
    case staleWriteAfterClear = "stale-write-after-clear"
    case oldRequestUnregistersNewer = "old-request-unregisters-newer"
    case noSingleFlight = "no-single-flight"
    case collidingCacheKey = "colliding-cache-key"
    case persistedValueOn404 = "persisted-value-on-404"
    case otherUsersPersistedValue = "other-users-persisted-value"
    case fanOutToExpired = "fan-out-to-expired"
    case fanOutToOtherUsers = "fan-out-to-other-users"
    case fanOutToIneligible = "fan-out-to-ineligible"
    case wrongBatchChunks = "wrong-batch-chunks"
    case hashBigEndian = "hash-big-endian"
    case hashWithoutSeparator = "hash-without-separator"
    case prefetchAssignments = "prefetch-assignments"
    case exposureForFallback = "exposure-for-fallback"
    case rateLimitAsNotFound = "rate-limit-as-not-found"
    case batchFailuresReportTrue = "batch-failures-report-true"
    case noOwnDeadline = "no-own-deadline"
    case cachesFailure = "caches-failure"
    case noPercentEncoding = "no-percent-encoding"
    case crashOnClearInFlight = "crash-on-clear-in-flight"
    case staleWriteAndOldRequestUnregisters = "stale-write-and-old-request-unregisters"
    case clearKeepsInFlight = "clear-keeps-in-flight"
    case cancelKeepsRequest = "cancel-keeps-request"
    case upstreamDefects = "upstream-defects"
    case canonicalIdentity = "canonical-identity"
    case unregisterBeforeCacheWrite = "unregister-before-cache-write"
    case joinFinishedFlight = "join-finished-flight"
    case timestampWholeSeconds = "timestamp-whole-seconds"
    case kindlessKey = "kindless-key"
    case zeroFieldsDropped = "zero-fields-dropped"
    case ignoresCacheSize = "ignores-cache-size"
    case nfcKeysOnTheWire = "nfc-keys-on-the-wire"
    case trimsUserIds = "trims-user-ids"
    case percentDecodesIds = "percent-decodes-ids"
    case ttlFromRequestStart = "ttl-from-request-start"
    case batchStopsAfterTransportFailure = "batch-stops-after-transport-failure"
    case cachesFallbackValue = "caches-fallback-value"
    case trackWithoutOwnDeadline = "track-without-own-deadline"
    case noFallbackOn4xx = "no-fallback-on-4xx"
    case numbersAsBooleans = "numbers-as-booleans"
    case noCacheHits = "no-cache-hits"
    case statusIgnoresTrackAnswer = "status-ignores-track-answer"
    case remembersFailure = "remembers-failure"
    case deadlineReportsCancelled = "deadline-reports-cancelled"
    case cancelEndsEveryWaiter = "cancel-ends-every-waiter"
    case cancelStarterEndsRequest = "cancel-starter-ends-request"
    case clearEndsRequests = "clear-ends-requests"
    case warmsUpKnownExperiments = "warms-up-known-experiments"

    /// What the broken SDK does, in one line.
    public var summary: String {
        switch self {
        case .staleWriteAfterClear: return "writes a response into the cache and the store after clearCache()/close()"
        case .oldRequestUnregistersNewer: return "finishing an old request removes a newer in-flight request for the same key"
        case .noSingleFlight: return "concurrent calls for one key each send a request"
        case .collidingCacheKey: return "cache key \"user:key\" collides for (\"a:b\",\"c\") and (\"a\",\"b:c\")"
        case .persistedValueOn404: return "serves the persisted value on 404 instead of removing it"
        case .otherUsersPersistedValue: return "serves the value persisted for another user"
        case .fanOutToExpired: return "fans unkeyed events out to expired cache entries"
        case .fanOutToOtherUsers: return "fans unkeyed events out to other users' entries"
        case .fanOutToIneligible: return "fans unkeyed events out to assigned:false answers"
        case .wrongBatchChunks: return "drops the events after the first batch of 100"
        case .hashBigEndian: return "reads the hash's first 4 MD5 bytes big-endian"
        case .hashWithoutSeparator: return "hashes \"{user}{key}\" without the ':' separator"
        case .prefetchAssignments: return "prefetches known experiments for a new identity (an exposure before display)"
        case .exposureForFallback: return "records an exposure event when it falls back to control"
        case .rateLimitAsNotFound: return "treats 429 as not found (deletes the persisted value)"
        case .batchFailuresReportTrue: return "reports true when a batch answered 200 with failure_count > 0"
        case .noOwnDeadline: return "relies on URLSession's timeout, so it hangs on a transport that never answers"
        case .cachesFailure: return "caches a failed evaluation as disabled"
        case .noPercentEncoding: return "does not percent-encode the flag key or the user id"
        case .crashOnClearInFlight: return "crashes the process (fatalError) when clearCache() runs with a request in flight"
        case .staleWriteAndOldRequestUnregisters: return "defects 1 and 2 together, as upstream: stale write after a clear, and an old request unregisters the newer one"
        case .clearKeepsInFlight: return "clearCache() keeps the in-flight table: a call after the clear joins the request from before it"
        case .cancelKeepsRequest: return "cancelling every waiter of a shared request leaves the network request running"
        case .upstreamDefects: return "the six defects of CONTRACT.md section 5 together, as the upstream SDK has them"
        case .canonicalIdentity: return "keys its cache by Swift String, so NFC and NFD spellings of one user id share an entry and a request"
        case .unregisterBeforeCacheWrite:
            return "unregisters the in-flight request, then awaits the offline-store write before caching: a call in between sends a second request"
        case .joinFinishedFlight:
            return "takes the waiting callers, then awaits the offline-store write before caching, unregistering and answering them: a call joining in between is never answered"
        case .timestampWholeSeconds:
            return "sends an event's timestamp cut to the whole second (`...:20.000Z` for 20.9996 s), as a Python example SDK did"
        case .kindlessKey:
            return "keys its memory cache by (user, key) without the kind: getAssignment of an experiment named like a cached flag returns the flag's answer"
        case .zeroFieldsDropped:
            return "tests an event's fields for truthiness: a value of 0, empty properties and the timestamp 0 are left out (sent as not set)"
        case .ignoresCacheSize:
            return "ignores cacheSize: its in-memory caches grow without bound"
        case .nfcKeysOnTheWire:
            return "sends flag and experiment keys in Unicode Normalization Form C, so an NFD key asks for its NFC twin"
        case .trimsUserIds:
            return "trims spaces around a user id on the wire (\" user-1\" is sent as user-1), as several SDKs' identify did"
        case .percentDecodesIds:
            return "percent-decodes a user id or flag key before encoding it (\"%41\" is sent as A, \"a%2Fb\" as a/b)"
        case .ttlFromRequestStart:
            return "counts a cache entry's age from when its request started, so a slow answer expires early"
        case .batchStopsAfterTransportFailure:
            return "stops a batch at a chunk whose connection dropped or timed out: the later chunks are never sent"
        case .cachesFallbackValue:
            return "writes the offline fallback value it served after a failure into its memory cache, and serves it as a hit"
        case .trackWithoutOwnDeadline:
            return "gives a keyed event's /track request no deadline of its own (lookups and batches keep theirs): it hangs on a transport that never answers"
        case .noFallbackOn4xx:
            return "serves the offline store only after a transport failure, 401, 429 or 5xx: a 400, 403 or 422 is thrown with a value persisted"
        case .numbersAsBooleans:
            return "sends an NSNumber 1 or 0 (as JSONSerialization gives an app) in a user's attributes or an event's properties as true or false"
        case .noCacheHits:
            return "never serves a fresh cache entry: every lookup sends a request (and every assignment records another exposure), though answers are still cached"
        case .statusIgnoresTrackAnswer:
            return "reports true from a keyed trackWithStatus once its /track was sent, whatever the answer (a 5xx, a dropped connection)"
        case .remembersFailure:
            return "remembers a lookup that failed (a 404, a 5xx, a dropped connection) and throws it again without a request until clearCache(); after a failed /track or /batch, keyed status calls and batches report false unsent"
        case .deadlineReportsCancelled:
            return "ends a lookup whose own deadline passed as cancelled, as an SDK that cancels its URLSession task does: the persisted value is never served"
        case .cancelEndsEveryWaiter:
            return "cancelling one caller of a shared request ends every caller waiting on it as cancelled (the request itself goes on)"
        case .cancelStarterEndsRequest:
            return "cancelling the caller that started a shared request cancels the request, though others still wait on it: they get the persisted value or an error"
        case .clearEndsRequests:
            return "clearCache() cancels the requests in flight, so their callers get the persisted value or an error instead of their answer"
        case .warmsUpKnownExperiments:
            return "after an assignment, assigns the same user to every other experiment the client was asked about (a warm-up): exposures no view made"
        }
    }

    /// Whether the defect is an atomicity violation across an internal `await` (issue 15): only
    /// interleaving exploration (`explore --interleave`) can reach it on purpose.
    public var needsInterleaving: Bool {
        switch self {
        case .unregisterBeforeCacheWrite, .joinFinishedFlight: return true
        default: return false
        }
    }

    /// The single defects this variant combines (itself for a single one): a variant with several
    /// reproduces an SDK where one defect can mask another (CONTRACT.md section 5, issue 11 section 9).
    public var includes: [Defect] {
        switch self {
        case .staleWriteAndOldRequestUnregisters: return [.staleWriteAfterClear, .oldRequestUnregistersNewer]
        case .upstreamDefects:
            return [.staleWriteAfterClear, .oldRequestUnregistersNewer, .cancelKeepsRequest, .fanOutToIneligible,
                    .batchFailuresReportTrue, .noOwnDeadline]
        default: return [self]
        }
    }

    /// The issue number of the defect list this variant implements (issue 6, items 1-19; later
    /// issues (10, 11, 15) append theirs after them).
    public var item: Int { Defect.allCases.firstIndex(of: self)! + 1 }
}
