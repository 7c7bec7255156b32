import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A stand-in for another Swift SDK whose module is also named `Experimently`: just enough of a
/// client (flag evaluation over HTTP, CONTRACT.md section 1) to be driven by the harness.
public final class ExperimentationClient: Sendable {
    /// The API origin.
    public let baseURL: String
    /// The API key sent as `X-API-Key`.
    public let apiKey: String
    private let session: URLSession

    /// Creates a client for `baseURL` with `apiKey`, sending through `session`.
    public init(baseURL: String, apiKey: String, session: URLSession) {
        self.baseURL = baseURL
        self.apiKey = apiKey
        self.session = session
    }

    /// A flag's state for a user.
    public struct Evaluation: Sendable {
        /// The flag key.
        public let key: String
        /// Whether the flag is on.
        public let enabled: Bool
    }

    /// Evaluates `flag` for `user` with `GET /api/v1/feature-flags/evaluate/{flag}?user_id=`.
    ///
    /// - Throws: `URLError` on transport failures and non-2xx answers.
    public func evaluateFlag(_ flag: String, user: String) async throws -> Evaluation {
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        let f = flag.addingPercentEncoding(withAllowedCharacters: allowed) ?? flag
        let u = user.addingPercentEncoding(withAllowedCharacters: allowed) ?? user
        var request = URLRequest(url: URL(string: "\(baseURL)/api/v1/feature-flags/evaluate/\(f)?user_id=\(u)")!)
        request.setValue(apiKey, forHTTPHeaderField: "X-API-Key")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse, (200..<300).contains(http.statusCode) else { throw URLError(.badServerResponse) }
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
        return Evaluation(key: object["key"] as? String ?? flag, enabled: object["enabled"] as? Bool ?? false)
    }
}
