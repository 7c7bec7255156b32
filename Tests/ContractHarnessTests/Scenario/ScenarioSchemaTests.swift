import XCTest
import Foundation
import ExperimentlyMock
@testable import ContractHarness

/// `Documentation/scenario.schema.json` cannot drift from the parser: it is the generated file,
/// every shipped scenario validates against it, and wherever the schema lists an object's keys,
/// a key it does not list is refused by the schema and by the parser alike.
final class ScenarioSchemaTests: XCTestCase {
    static let committed = Repository.root.appendingPathComponent("Documentation/scenario.schema.json")

    static func shipped() throws -> [(file: String, json: JSONValue)] {
        let folder = Repository.root.appendingPathComponent("scenarios")
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") }.sorted().map { name in
            let path = folder.appendingPathComponent(name).path
            var text = try String(contentsOfFile: path, encoding: .utf8)
            text = text.replacingOccurrences(of: "{{seed}}", with: "0")
            return (path, try JSONValue.parse(Data(text.utf8), file: path))
        }
    }

    func testEveryVerbOfTheParserHasAShape() {
        XCTAssertEqual(ScenarioSchema.missingVerbs, [], "verbs the schema gives only an open shape")
        XCTAssertEqual(ScenarioSchema.shapedVerbs, Set(ScenarioParser.verbs))
    }

    func testTheCommittedSchemaIsTheGeneratedOne() throws {
        let data = try Data(contentsOf: Self.committed)
        XCTAssertEqual(try JSONValue.parse(data, file: "schema"), ScenarioSchema.json,
                       "Documentation/scenario.schema.json is stale: run contract-harness schema --out Documentation/scenario.schema.json")
        #if os(Linux)
        XCTAssertEqual(String(decoding: data, as: UTF8.self), ScenarioSchema.text)
        #endif
    }

    func testEveryShippedScenarioValidates() throws {
        let validator = SchemaValidator(root: ScenarioSchema.json)
        let files = try Self.shipped()
        XCTAssertGreaterThan(files.count, 50)
        for (file, json) in files {
            XCTAssertEqual(validator.problems(json, ScenarioSchema.json), [], file)
        }
    }

    /// Keys whose values are free-form (fixtures, fault rules, JSON bodies, attribute and header
    /// maps, client names): the schema does not list their keys.
    static let freeForm: Set<String> = ["fixtures", "fault", "value", "body", "body_equals", "properties", "json", "attributes",
                                        "headers", "response_headers", "clients"]

    /// Every object in `json` outside free-form values, with a way to rebuild the whole with it changed.
    static func objects(in json: JSONValue, rebuild: @escaping (JSONValue) -> JSONValue, path: String, into out: inout [(String, JSONValue, (JSONValue) -> JSONValue)]) {
        switch json {
        case .object(let o):
            out.append((path, json, rebuild))
            for (k, v) in o where !freeForm.contains(k) {
                objects(in: v, rebuild: { new in var copy = o; copy[k] = new; return rebuild(.object(copy)) }, path: path + "." + k, into: &out)
            }
        case .array(let a):
            for (i, v) in a.enumerated() {
                objects(in: v, rebuild: { new in var copy = a; copy[i] = new; return rebuild(.array(copy)) }, path: "\(path)[\(i)]", into: &out)
            }
        default: break
        }
    }

    func testAKeyTheSchemaDoesNotListIsRefusedByTheSchemaAndTheParser() throws {
        let validator = SchemaValidator(root: ScenarioSchema.json)
        var tried = 0
        // One object of each shape (its path without indices and its set of keys): the same step
        // shape in sixty files says nothing new.
        var seen: Set<String> = []
        for (file, json) in try Self.shipped() {
            var found: [(String, JSONValue, (JSONValue) -> JSONValue)] = []
            Self.objects(in: json, rebuild: { $0 }, path: "$", into: &found)
            for (path, object, rebuild) in found {
                guard case .object(var o) = object else { continue }
                let shape = path.replacingOccurrences(of: #"\[\d+\]"#, with: "[]", options: .regularExpression) + " " + o.keys.sorted().joined(separator: ",")
                guard seen.insert(shape).inserted else { continue }
                o["zz_not_a_key"] = .bool(true)
                let mutated = rebuild(.object(o))
                let schemaSays = validator.problems(mutated, ScenarioSchema.json)
                XCTAssertFalse(schemaSays.isEmpty, "\(file) \(path): the schema accepts an unknown key")
                // The format's readers: the parser, and for "explore" the explorer's settings.
                XCTAssertThrowsError(try {
                    _ = try ScenarioParser.parse(mutated.serialized(), file: file)
                    _ = try Explorer.settings(of: mutated, file: file)
                }(), "\(file) \(path): the readers accept an unknown key")
                tried += 1
            }
        }
        XCTAssertGreaterThan(tried, 100)
    }

    func testValuesOutsideTheParsersListsAreRefusedByBoth() throws {
        let validator = SchemaValidator(root: ScenarioSchema.json)
        let base: JSONValue = try JSONValue.parse(Data(#"""
        {"format": "experimently-scenario/1", "name": "n", "description": "d",
         "steps": [{"do": "evaluateFlag", "flag": "f", "user": "u", "expect": {"value": {"enabled": true}}}], "checks": ["single_flight"]}
        """#.utf8), file: "base")
        XCTAssertEqual(validator.problems(base, ScenarioSchema.json), [])
        XCTAssertNoThrow(try ScenarioParser.parse(base.serialized(), file: "base"))
        let broken: [(String, String)] = [
            (#""format": "experimently-scenario/1""#, #""format": "experimently-scenario/2""#),
            (#""do": "evaluateFlag""#, #""do": "evaluateEverything""#),
            (#""checks": ["single_flight"]"#, #""checks": ["single_fight"]"#),
            (#""expect": {"value": {"enabled": true}}"#, #""expect": {"error": "oops"}"#),
            (#""expect": {"value": {"enabled": true}}"#, #""expect": {"value": 1, "error": "networkError"}"#),
            (#""user": "u""#, #""user": 7"#),
            (#""steps": [{"do""#, #""step_timeout_ms": 0, "steps": [{"do""#),
            (#""steps": [{"do""#, #""requires": ["teleport"], "steps": [{"do""#),
        ]
        for (from, to) in broken {
            let text = base.serialized()
            let mutated = String(decoding: text, as: UTF8.self).replacingOccurrences(of: from.replacingOccurrences(of: "\": ", with: "\":").replacingOccurrences(of: ", \"", with: ",\""), with: to)
            XCTAssertNotEqual(mutated, String(decoding: text, as: UTF8.self), "the replacement of \(from) did not apply")
            let json = try JSONValue.parse(Data(mutated.utf8), file: "m")
            XCTAssertFalse(validator.problems(json, ScenarioSchema.json).isEmpty, "schema accepts \(to)")
            XCTAssertThrowsError(try ScenarioParser.parse(Data(mutated.utf8), file: "m"), "parser accepts \(to)")
        }
    }

    func testSchemaCommandPrintsTheSchema() async throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: out) }
        let status = await HarnessCommand.main(["schema", "--out", out.path])
        XCTAssertEqual(status, 0)
        XCTAssertEqual(try String(contentsOf: out, encoding: .utf8), ScenarioSchema.text)
    }
}
