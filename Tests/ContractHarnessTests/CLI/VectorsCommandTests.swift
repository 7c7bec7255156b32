import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// A child process run to completion under a deadline (killed when it passes), for CLI tests.
struct BoundedRun {
    let status: Int32
    let out: String
    let err: String
    let seconds: Double
    let timedOut: Bool

    /// Runs `executable` with `arguments`; kills it after `timeout` seconds.
    static func run(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil, directory: URL? = nil,
                    timeout: Double = 60) throws -> BoundedRun {
        let p = Process()
        p.executableURL = executable
        p.arguments = arguments
        if let environment { p.environment = environment }
        if let directory { p.currentDirectoryURL = directory }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        let done = DispatchSemaphore(value: 0)
        p.terminationHandler = { _ in done.signal() }
        let started = Date()
        try p.run()
        let outData = LockedData(), errData = LockedData()
        let readers = DispatchGroup()
        for (pipe, sink) in [(out, outData), (err, errData)] {
            DispatchQueue.global().async(group: readers) { sink.set(pipe.fileHandleForReading.readDataToEndOfFile()) }
        }
        var timedOut = false
        if done.wait(timeout: .now() + timeout) == .timedOut {
            timedOut = true
            kill(p.processIdentifier, SIGKILL)
            done.wait()
        }
        _ = readers.wait(timeout: .now() + 5)
        return BoundedRun(status: p.terminationStatus, out: String(decoding: outData.get(), as: UTF8.self),
                          err: String(decoding: errData.get(), as: UTF8.self), seconds: Date().timeIntervalSince(started), timedOut: timedOut)
    }
}

/// Bytes behind a lock (`@unchecked Sendable`: `data` is guarded by `lock`).
final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func set(_ d: Data) { lock.lock(); data = d; lock.unlock() }
    func append(_ d: Data) { lock.lock(); data.append(d); lock.unlock() }
    func get() -> Data { lock.lock(); defer { lock.unlock() }; return data }
}

/// `contract-harness vectors` through the real binary (exit codes, lines, the verdict) and the
/// mismatch-cause diagnosis in-process.
final class VectorsCommandTests: XCTestCase {
    static let root = Repository.root
    static let vectors = root.appendingPathComponent("golden-vectors").path
    static let adapters = root.appendingPathComponent("golden-vectors/adapters")

    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("vectors-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    func requireBinary() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path), "contract-harness not built at \(HarnessCLITests.binary.path)")
    }

    func requirePython() throws -> String {
        let found = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
            .map { URL(fileURLWithPath: String($0)).appendingPathComponent("python3").path }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let found else { throw XCTSkip("python3 is not on PATH; the Python adapters cannot run") }
        return found
    }

    func vectors(_ arguments: [String], timeout: Double = 60) throws -> BoundedRun {
        try requireBinary()
        return try BoundedRun.run(HarnessCLITests.binary, ["vectors"] + arguments, directory: dir, timeout: timeout)
    }

    func verdict(_ name: String = "vectors-verdict.json") throws -> [String: JSONValue] {
        try XCTUnwrap(JSONValue.parse(Data(contentsOf: dir.appendingPathComponent(name))).value.objectValue)
    }

    func testBuiltInSDKMatchesEveryVector() throws {
        let r = try vectors(["--vectors", Self.vectors])
        XCTAssertEqual(r.status, 0, r.out + r.err)
        XCTAssertTrue(r.out.hasPrefix("vectors: 482 vectors, 1210 checks, all match"), r.out)
        let v = try verdict()
        XCTAssertEqual(v["format"], .string("experimently-verdict/1"))
        XCTAssertEqual(v["ok"], .bool(true))
        XCTAssertEqual(v["sdk"], .string("ios"))
        let section = try XCTUnwrap(v["vectors"])
        XCTAssertEqual(section["mode"], .string("built-in"))
        XCTAssertEqual(section["checks"], .number(1210))
        XCTAssertEqual(section["failed"], .number(0))
        XCTAssertEqual(section["mismatches"], .array([]))
        XCTAssertEqual(section["files"]?.arrayValue?.count, 3)
    }

    func testReferenceAdapterPasses() throws {
        let python = try requirePython()
        let adapter = Self.adapters.appendingPathComponent("reference_adapter.py").path
        let r = try vectors(["--vectors", Self.vectors, "--sdk-command", "\(python) '\(adapter)'", "--verdict", "ref.json"])
        XCTAssertEqual(r.status, 0, r.out + r.err)
        let section = try XCTUnwrap(try verdict("ref.json")["vectors"])
        XCTAssertEqual(section["mode"], .string("command"))
        XCTAssertEqual(section["md5_checked"], .bool(true))
        XCTAssertEqual(section["checks"], .number(1210))
        XCTAssertEqual(section["ok"], .bool(true))
    }

    /// A correct program that leaves a background helper behind, holding its standard output,
    /// passes: its exit ends the run (the helper in its group is killed; one that left the group
    /// is waited for 300 ms at most). Before, it "did not finish within" the timeout.
    func testAProgramThatLeavesAHelperHoldingItsOutputPasses() throws {
        let python = try requirePython()
        let adapter = Self.adapters.appendingPathComponent("reference_adapter.py").path
        for helper in ["sleep 30 &", "setsid sleep 3 &"] {
            let r = try vectors(["--vectors", Self.vectors, "--sdk-command", "\(helper) \(python) '\(adapter)'", "--timeout", "20", "--verdict", "helper.json"])
            XCTAssertEqual(r.status, 0, "\(helper): " + r.out + r.err)
            XCTAssertEqual(try XCTUnwrap(try verdict("helper.json")["vectors"])["ok"], .bool(true), helper)
        }
    }

    /// A helper the program starts in a session of its own (`setsid`) is killed when the program
    /// ends, as a driver adapter's is, and the program runs in the adapters' time zone. Before,
    /// the helper outlived `vectors` (a sixty-sixth outside tester, F7).
    func testADetachedHelperIsKilledAndTheProgramRunsInTheAdaptersTimeZone() throws {
        #if os(Linux)
        let python = try requirePython()
        let adapter = Self.adapters.appendingPathComponent("reference_adapter.py").path
        let marker = "\(Int.random(in: 100...999)).\(Int.random(in: 100...999))"
        let zone = dir.appendingPathComponent("tz.txt").path
        let r = try vectors(["--vectors", Self.vectors, "--sdk-command",
                             "printf %s \"$TZ\" > '\(zone)'; setsid sleep \(marker) & \(python) '\(adapter)'", "--verdict", "detached.json"])
        XCTAssertEqual(r.status, 0, r.out + r.err)
        XCTAssertEqual(try String(contentsOfFile: zone, encoding: .utf8), "Asia/Kathmandu")
        let left = try FileManager.default.contentsOfDirectory(atPath: "/proc").filter { pid in
            guard Int(pid) != nil, let line = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            return String(decoding: line, as: UTF8.self).contains(marker)
        }
        XCTAssertEqual(left, [], "sleep \(marker) still runs")
        #else
        throw XCTSkip("descendants are found through /proc (Linux)")
        #endif
    }

    func testBigEndianAdapterFailsWithTheByteOrderCause() throws {
        let python = try requirePython()
        let adapter = Self.adapters.appendingPathComponent("big_endian_adapter.py").path
        let r = try vectors(["--vectors", Self.vectors, "--sdk-command", "\(python) '\(adapter)'"])
        XCTAssertEqual(r.status, 1, r.out + r.err)
        XCTAssertTrue(r.out.contains(#"MISMATCH hash-vectors.json hash_vectors[0] user_id="user-123" flag_key="my-flag": hash expected 0.6927449859213084, actual 0.2645926291588694; likely cause: byte order"#), r.out)
        XCTAssertTrue(r.out.contains("most likely cause: byte order (482 of 482)"), r.out)
        let v = try verdict()
        XCTAssertEqual(v["ok"], .bool(false))
        let section = try XCTUnwrap(v["vectors"])
        XCTAssertEqual(section["causes"], .object(["byte order": .number(482)]))
        let first = try XCTUnwrap(section["mismatches"]?.arrayValue?.first)
        XCTAssertEqual(first["user_id"], .string("user-123"))
        XCTAssertEqual(first["expected"], .number(0.6927449859213084))
        XCTAssertEqual(first["actual"], .number(0.2645926291588694))
        XCTAssertEqual(first["cause"], .string("byte order"))
    }

    func testCrashingProgramIsAClearFailure() throws {
        let r = try vectors(["--vectors", Self.vectors, "--sdk-command", "cat >/dev/null; echo 'Traceback: boom' >&2; exit 3"])
        XCTAssertEqual(r.status, 1, r.out + r.err)
        XCTAssertTrue(r.err.contains("the SDK program exited with status 3"), r.err)
        XCTAssertTrue(r.err.contains("Traceback: boom"), r.err)
        let section = try XCTUnwrap(try verdict()["vectors"])
        XCTAssertEqual(section["error"], .string("the SDK program exited with status 3"))
        XCTAssertEqual(section["program_stderr"], .string("Traceback: boom\n"))

        let killed = try vectors(["--vectors", Self.vectors, "--sdk-command", "kill -SEGV $$"])
        XCTAssertEqual(killed.status, 1, killed.out + killed.err)
        XCTAssertTrue(killed.err.contains("killed by signal 11"), killed.err)
    }

    func testHangingProgramIsKilledAtTheTimeout() throws {
        // The shell's child (sleep) is killed with the process group, so nothing outlives the run.
        let r = try vectors(["--vectors", Self.vectors, "--timeout", "0.5", "--sdk-command", "sleep 120; echo never"], timeout: 30)
        XCTAssertFalse(r.timedOut, "the harness itself hung")
        XCTAssertEqual(r.status, 1, r.out + r.err)
        XCTAssertLessThan(r.seconds, 20)
        XCTAssertTrue(r.err.contains("did not finish within 0.5 s (--timeout); it was killed"), r.err)
        XCTAssertEqual(try verdict()["vectors"]?["error"], .string("the SDK program did not finish within 0.5 s (--timeout); it was killed"))
    }

    func testProgramPrintingSomethingElseIsAClearFailure() throws {
        let r = try vectors(["--vectors", Self.vectors, "--sdk-command", "echo hello"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.err.contains("standard output is not one JSON object"), r.err)
        XCTAssertTrue(r.err.contains(#"it printed: "hello\n""#), r.err)
        let short = try vectors(["--vectors", Self.vectors, "--sdk-command", #"cat >/dev/null; echo '{"hashes": [0.5], "md5_hex": null}'"#])
        XCTAssertEqual(short.status, 1)
        XCTAssertTrue(short.err.contains("answered 1 hashes for 473 inputs"), short.err)
        let text = try vectors(["--vectors", Self.vectors, "--sdk-command", #"cat >/dev/null; echo '{"result": 1}'"#])
        XCTAssertEqual(text.status, 1)
        XCTAssertTrue(text.err.contains(#"has no "hashes" array (members: result)"#), text.err)
    }

    /// A member written twice in the program's answer is the adapter's fault, named, whichever
    /// copy is right: before, the last one counted (a wrong first `hashes` passed, a wrong last
    /// one read as a hash bug of unknown cause).
    func testAnAnswerWithAMemberWrittenTwiceIsRefusedNamingIt() throws {
        for answer in [#"{"hashes": [0.5], "hashes": [0.25], "md5_hex": null}"#, #"{"md5_hex": null, "hashes": [0.5], "md5_hex": null}"#] {
            let r = try vectors(["--vectors", Self.vectors, "--sdk-command", "cat >/dev/null; echo '\(answer)'", "--verdict", "dup.json"])
            XCTAssertEqual(r.status, 1, r.out + r.err)
            XCTAssertTrue(r.err.contains("standard output has a duplicate key"), r.err)
            XCTAssertTrue(r.err.contains("write each member once"), r.err)
            XCTAssertTrue(try verdict("dup.json")["vectors"]?["error"]?.stringValue?.contains("duplicate key") == true)
        }
        // The live check's smoke line too.
        let line = #"{"sdk":"py","assign":{"variant_name":"control","is_control":true,"sticky":false,"sticky":true},"flag":{"enabled":true},"track":{"ok":true},"fanout":{"ok":true}}"#
        let problems = LiveContractCheck.smokeProblems(sdk: "py", stdout: line + "\n")
        XCTAssertEqual(problems.count, 1, "\(problems)")
        XCTAssertTrue(problems.first?.contains("duplicate key \"sticky\" at $.assign.sticky") == true, "\(problems)")
        XCTAssertEqual(LiveContractCheck.smokeProblems(sdk: "py", stdout: line.replacingOccurrences(of: #""sticky":false,"#, with: "")), [])
    }

    func testUpstreamFileAloneAndAnAdapterThatIgnoresStdin() throws {
        // One file in the upstream format works as --vectors; a program may answer without reading
        // its input (EPIPE on our side is handled, not fatal).
        let upstream = Self.root.deletingLastPathComponent().appendingPathComponent("shared/upstream/golden-vectors.json").path
        let file = FileManager.default.fileExists(atPath: upstream) ? upstream : Self.vectors + "/hash-vectors.json"
        let r = try vectors(["--vectors", file])
        XCTAssertEqual(r.status, 0, r.out + r.err)
        XCTAssertTrue(r.out.hasPrefix("vectors: 11 vectors, 28 checks, all match"), r.out)
        // The rollout inputs repeat two hash inputs: the program is asked about 9 unique pairs.
        let hashes = GoldenVectors.hash.map { String($0.hash) }
        let answer = #"{"hashes": [\#(hashes.joined(separator: ", "))], "md5_hex": null}"#
        let blind = try vectors(["--vectors", file, "--sdk-command", "echo '\(answer)'"])
        XCTAssertEqual(blind.status, 0, blind.out + blind.err)
    }

    func testMalformedVectorsAndBadUsageExitSixtyFour() throws {
        let bad = dir.appendingPathComponent("bad")
        try FileManager.default.createDirectory(at: bad, withIntermediateDirectories: true)
        try Data(#"{"hash_vectors": [{"user_id": "u", "flag_key": "k", "expected_hash": "0.5"}]}"#.utf8)
            .write(to: bad.appendingPathComponent("hash-vectors.json"))
        let r = try vectors(["--vectors", bad.path])
        XCTAssertEqual(r.status, 64, r.out + r.err)
        XCTAssertTrue(r.err.contains("hash-vectors.json: at $.hash_vectors[0].expected_hash: expected a number in [0, 1), found the string \"0.5\""), r.err)
        XCTAssertEqual(try verdict()["ok"], .bool(false))

        let missing = try vectors(["--vectors", dir.appendingPathComponent("nowhere").path])
        XCTAssertEqual(missing.status, 64)
        XCTAssertTrue(missing.err.contains("no such folder"), missing.err)
        XCTAssertEqual(try vectors(["--timeout", "soon"]).status, 64)
        XCTAssertEqual(try vectors(["--sdk-command"]).status, 64)
        XCTAssertEqual(try vectors(["--frobnicate"]).status, 64)
        let help = try vectors(["--help"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.out.contains("--sdk-command CMD"), help.out)
    }

    // MARK: Diagnosis, in-process

    func testDiagnosisNamesEachKnownMistake() {
        func hash(_ bytes: [UInt8], bigEndian: Bool = false) -> Double {
            let d = VectorsDiagnosis.digest(bytes)
            return Double(bigEndian ? VectorsDiagnosis.be32(d) : VectorsDiagnosis.le32(d)) / 4_294_967_296
        }
        let right = hash(Array("user-123:my-flag".utf8))
        XCTAssertEqual(right, 0.6927449859213084, accuracy: 1e-15)
        XCTAssertEqual(VectorsDiagnosis.hashCause(user: "user-123", key: "my-flag", actual: hash(Array("user-123:my-flag".utf8), bigEndian: true)).name, "byte order")
        let le = VectorsDiagnosis.le32(VectorsDiagnosis.digest(Array("test-user:flag-key".utf8)))
        XCTAssertEqual(VectorsDiagnosis.hashCause(user: "test-user", key: "flag-key", actual: Double(le) / 4_294_967_295).detail,
                       "divided by 2^32 - 1 (4294967295); divide by 2^32 (4294967296)")
        // test-user/flag-key hashes to 0.99: its signed reading is negative, out of [0, 1), and said so.
        let signed = VectorsDiagnosis.hashCause(user: "test-user", key: "flag-key", actual: Double(Int32(bitPattern: le)) / 4_294_967_296)
        XCTAssertEqual(signed.name, "out of range")
        XCTAssertTrue(signed.detail.contains("signed 32-bit"), signed.detail)
        let le2 = VectorsDiagnosis.le32(VectorsDiagnosis.digest(Array("alice:dark-mode".utf8)))
        XCTAssertEqual(VectorsDiagnosis.hashCause(user: "alice", key: "dark-mode", actual: Double(le2) / 2_147_483_648).name, "divisor")
        XCTAssertEqual(VectorsDiagnosis.hashCause(user: "user-123", key: "my-flag", actual: hash(Array("user-123my-flag".utf8))).name, "separator")
        XCTAssertEqual(VectorsDiagnosis.hashCause(user: "user-123", key: "my-flag", actual: hash(Array("user-123|my-flag".utf8))).name, "separator")
        let nfd = "Jose\u{301}"
        let nfc = VectorsDiagnosis.hashCause(user: nfd, key: "checkout", actual: hash(Array("Jos\u{e9}:checkout".utf8)))
        XCTAssertEqual(nfc.name, "encoding")
        XCTAssertTrue(nfc.detail.contains("NFC"), nfc.detail)
        let utf16 = Array("caf\u{e9}:menu".utf16).flatMap { [UInt8($0 & 0xff), UInt8($0 >> 8)] }
        XCTAssertTrue(VectorsDiagnosis.hashCause(user: "caf\u{e9}", key: "menu", actual: hash(utf16)).detail.contains("UTF-16LE"))
        XCTAssertTrue(VectorsDiagnosis.hashCause(user: "caf\u{e9}", key: "menu", actual: hash([99, 97, 102, 0xe9, 58, 109, 101, 110, 117])).detail.contains("Latin-1"))
        XCTAssertEqual(VectorsDiagnosis.hashCause(user: "user-123", key: "my-flag", actual: 0.5), VectorsDiagnosis.unknown)
        // Written with six digits, rounded or cut (a seventy-third outside tester).
        XCTAssertEqual(VectorsDiagnosis.hashCause(user: "user-123", key: "my-flag", actual: 0.692745).detail,
                       "the hash was rounded to 6 decimal digits; write it with every digit (the shortest text that reads back as the same double)")
        XCTAssertEqual(VectorsDiagnosis.hashCause(user: "user-123", key: "my-flag", actual: 0.6927449).detail.prefix(30), "the hash was cut to 7 decimal ")
        XCTAssertEqual(VectorsDiagnosis.md5Cause(user: "user-123", key: "my-flag", actualHex: "0f1705ac222124c571ec1de8b157bc43").name, "byte order")
    }

    func testDiagnosisNamesFloatDivisionSignedAbsAndOutOfRange() {
        // A 32-bit float division: 24 bits kept, far beyond the 1e-10 tolerance.
        for (user, key) in [("test-user", "flag-key"), ("user-123", "my-flag"), ("alice", "dark-mode")] {
            let le = VectorsDiagnosis.le32(VectorsDiagnosis.digest(Array("\(user):\(key)".utf8)))
            let exact = Double(le) / 4_294_967_296
            let float32 = Double(Float(le) / Float(4_294_967_296))
            XCTAssertGreaterThan(abs(float32 - exact), VectorsFile.tolerance, "\(user): the float reading must differ")
            let cause = VectorsDiagnosis.hashCause(user: user, key: key, actual: float32)
            XCTAssertEqual(cause.name, "float precision", "\(user): \(cause.detail)")
            XCTAssertTrue(cause.detail.contains("32-bit"), cause.detail)
            XCTAssertEqual(VectorsDiagnosis.hashCause(user: user, key: key, actual: Double(Float(exact))).name, "float precision", user)
        }
        // abs(Int32)/2^31, as Java's Math.abs(int) does: user-123/my-flag has its top bit set
        // (hash 0.69), so the signed reading is negative and abs() folds it.
        let le = VectorsDiagnosis.le32(VectorsDiagnosis.digest(Array("user-123:my-flag".utf8)))
        XCTAssertGreaterThanOrEqual(le, 1 << 31)
        let folded = Double(Int32(bitPattern: le).magnitude) / 2_147_483_648
        XCTAssertLessThan(folded, 1)
        let abs31 = VectorsDiagnosis.hashCause(user: "user-123", key: "my-flag", actual: folded)
        XCTAssertEqual(abs31.name, "signed abs", abs31.detail)
        XCTAssertTrue(abs31.detail.contains("abs()"), abs31.detail)
        XCTAssertEqual(VectorsDiagnosis.hashCause(user: "user-123", key: "my-flag",
                                                  actual: Double(Int32(bitPattern: le).magnitude) / 2_147_483_647).name, "signed abs")
        // Exactly 1.0, and other values outside [0, 1).
        let one = VectorsDiagnosis.hashCause(user: "user-123", key: "my-flag", actual: 1.0)
        XCTAssertEqual(one.name, "out of range")
        XCTAssertTrue(one.detail.contains("exactly 1.0, which is out of [0, 1)"), one.detail)
        XCTAssertEqual(VectorsDiagnosis.hashCause(user: "user-123", key: "my-flag", actual: -0.25).name, "out of range")
        // Out of range and reproduced by a known mistake: both are said.
        let over = VectorsDiagnosis.hashCause(user: "user-123", key: "my-flag", actual: Double(le) / 2_147_483_648)
        XCTAssertEqual(over.name, "out of range")
        XCTAssertTrue(over.detail.contains("divided by 2^31"), over.detail)
        // A value in range that no mistake explains is still unknown.
        XCTAssertEqual(VectorsDiagnosis.hashCause(user: "user-123", key: "my-flag", actual: 0.5), VectorsDiagnosis.unknown)
    }

    func testCompareCountsDerivedChecksOnlyForMatchingHashes() {
        let c = VectorCase(file: "f", location: "rollout_vectors[0]", userID: "alice", key: "dark-mode", expectedHash: 0.0353864398784935,
                           md5Hex: nil, rollouts: [.init(percent: 3, included: false), .init(percent: 5, included: true)], bucket: 3, md5Mod100: nil)
        let index = [VectorsCommand.InputKey(c): 0]
        let good = VectorsCommand.compare([c], answers: .init(hashes: [0.0353864398784935], md5: nil), index: index)
        XCTAssertEqual(good.checks, 4)
        XCTAssertTrue(good.mismatches.isEmpty)
        let bad = VectorsCommand.compare([c], answers: .init(hashes: [0.04], md5: nil), index: index)
        XCTAssertEqual(bad.checks, 1)
        XCTAssertEqual(bad.mismatches.map(\.check), ["hash"])
    }
}
