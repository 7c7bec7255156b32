import Foundation
import ExperimentlyMock
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The upstream live runner's published rules (`tests/sdk-contract/live/run_live_contract.py`),
/// written anew: the ruleset row and the SDK row, so an SDK's CI can judge itself against
/// `contract-harness serve` (or a real backend) without the upstream repository or its database.
///
/// - Ruleset row: `GET /api/v1/sdk/ruleset` with the plain key answers 403; with the
///   `sdk:ruleset` key 200, `schema` 1, `bucketing` `md5-mod100-v1`, `ETag` equal to
///   `"<version>"`, the contract flag present as `{active: true, evaluation: "local",
///   rollout_percentage: 100}`; sending the ETag back in `If-None-Match` answers 304 with no body.
/// - SDK row: the last non-empty stdout line of the SDK's smoke is a JSON object with `sdk` equal
///   to the SDK's name, `assign.variant_name` in {control, treatment}, a boolean
///   `assign.is_control`, `assign.sticky`, `flag.enabled`, `track.ok` and `fanout.ok` all true
///   (CONTRACT.md section 7).
public enum LiveContractCheck {
    /// The ruleset path.
    public static let rulesetPath = "/api/v1/sdk/ruleset"

    /// One HTTP exchange: status, lower-cased headers, body.
    struct Exchange {
        var status: Int
        var headers: [String: String]
        var body: Data
    }

    private static func get(_ url: URL, key: String, etag: String?, session: URLSession) async throws -> Exchange {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 10)
        request.setValue(key, forHTTPHeaderField: "X-API-Key")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let etag { request.setValue(etag, forHTTPHeaderField: "If-None-Match") }
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return Exchange(status: http.statusCode, headers: headers, body: data)
    }

    /// The ruleset row's problems (empty when it passes) and a one-line summary.
    ///
    /// - Parameters:
    ///   - baseURL: the backend's origin, e.g. `http://127.0.0.1:8000`.
    ///   - plainKey: a valid key without `sdk:ruleset`; `scopedKey`: one with it.
    ///   - flagKey: the contract flag (`sdk_contract_flag`).
    public static func rulesetRow(baseURL: String, plainKey: String, scopedKey: String, flagKey: String = "sdk_contract_flag") async -> (problems: [String], summary: String) {
        let trimmed = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        guard let url = URL(string: trimmed + rulesetPath) else { return (["the URL \(baseURL) is not valid"], "") }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        let session = URLSession(configuration: configuration)
        defer { session.invalidateAndCancel() }
        var problems: [String] = []
        do {
            let plain = try await get(url, key: plainKey, etag: nil, session: session)
            if plain.status != 403 { problems.append("the unscoped key got \(plain.status) from \(rulesetPath), expected 403") }
            let scoped = try await get(url, key: scopedKey, etag: nil, session: session)
            guard scoped.status == 200 else {
                problems.append("the sdk:ruleset key got \(scoped.status) from \(rulesetPath), expected 200")
                return (problems, "")
            }
            guard let doc = try? JSONValue.parse(scoped.body).value, doc.objectValue != nil else {
                problems.append("the ruleset body is not a JSON object: \(String(decoding: scoped.body.prefix(200), as: UTF8.self))")
                return (problems, "")
            }
            if doc["schema"] != .number(1) || doc["bucketing"] != .string("md5-mod100-v1") {
                problems.append("schema/bucketing are \(doc["schema"] ?? .null)/\(doc["bucketing"] ?? .null)")
            }
            let etag = scoped.headers["etag"] ?? ""
            let version = doc["version"]?.stringValue ?? ""
            if version.isEmpty || etag != "\"\(version)\"" { problems.append("ETag \(etag) is not the body version \"\(version)\"") }
            let flags = doc["flags"]?.arrayValue ?? []
            let flag = flags.first { $0["key"]?.stringValue.map { Array($0.unicodeScalars) == Array(flagKey.unicodeScalars) } ?? false }
            if flag?["active"] != .bool(true) || flag?["evaluation"] != .string("local") || flag?["rollout_percentage"] != .number(100) {
                problems.append("flag '\(flagKey)' is \(flag.map(\.jsonText) ?? "absent"), expected active, local, rollout 100")
            }
            let again = try await get(url, key: scopedKey, etag: etag, session: session)
            if again.status != 304 || !again.body.isEmpty {
                problems.append("If-None-Match with the current ETag got \(again.status) (\(again.body.count) bytes), expected 304")
            }
            return (problems, problems.isEmpty ? "403 unscoped, 200 scoped (\(flags.count) flags), 304 on ETag" : "")
        } catch {
            problems.append("\(rulesetPath) could not be loaded: \(error.localizedDescription)")
            return (problems, "")
        }
    }

    /// The SDK row's problems for the smoke's standard output (empty when it passes).
    public static func smokeProblems(sdk: String, stdout: String) -> [String] {
        let lines = stdout.split(whereSeparator: \.isNewline).map(String.init).filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        guard let last = lines.last else { return ["no JSON line on stdout"] }
        guard let payload = try? JSONValue.parse(Data(last.utf8)).value, payload.objectValue != nil else {
            return ["last stdout line is not a JSON object: \(String(last.prefix(200)))"]
        }
        // A member written twice is refused, as the driver protocol refuses it: which one counts
        // is the reader's whim (`"sticky":false,"sticky":true` passed, the last one winning).
        if let duplicate = JSONDuplicateKey.first(inValid: Data(last.utf8)) {
            return ["the last stdout line has a \(duplicate): write each member once"]
        }
        var problems: [String] = []
        if payload["sdk"]?.stringValue.map({ Array($0.unicodeScalars) == Array(sdk.unicodeScalars) }) != true {
            // Both unambiguous: an NFD name printed like the NFC one expected (a forty-eighth outside tester, M).
            problems.append("sdk field is \(payload["sdk"]?.unambiguousJSONText ?? "absent"), expected \(JSONValue.string(sdk).unambiguousJSONText)")
        }
        let assign = payload["assign"]
        if assign?["variant_name"] != .string("control") && assign?["variant_name"] != .string("treatment") {
            problems.append("assign.variant_name=\(assign?["variant_name"]?.jsonText ?? "absent")")
        }
        if case .bool? = assign?["is_control"] {} else { problems.append("assign.is_control is not a bool") }
        if assign?["sticky"] != .bool(true) { problems.append("assignment was not sticky") }
        if payload["flag"]?["enabled"] != .bool(true) { problems.append("flag.enabled=\(payload["flag"]?["enabled"]?.jsonText ?? "absent") (the contract flag is 100% on)") }
        if payload["track"]?["ok"] != .bool(true) { problems.append("track failed") }
        if payload["fanout"]?["ok"] != .bool(true) { problems.append("fan-out track failed") }
        return problems
    }
}
