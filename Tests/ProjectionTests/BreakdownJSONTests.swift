import Foundation
import LibPQ
import LocalPostgres
@testable import Projection
import Testing

/// The breakdown column's hand-written JSON, through PostgreSQL's jsonb and back.
@Suite("breakdown JSON")
struct BreakdownJSONTests {
    @Test("what the job writes comes back unchanged after jsonb normalises it")
    func roundTripThroughJSONB() async throws {
        let values: [String: String] = [
            "context.os.name": "iOS", "properties.flow_version": "v3", "quote\"key": "back\\slash",
            "line": "a\nb\tc", "unicode": "ünï 北京 🚀", "control": "\u{01}x", "empty": "",
        ]
        let text = OutcomeStore.jsonObject(values)
        #expect(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String] == values)
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        let normalised = try await pool.query("SELECT $1::jsonb", [.json(text)]).scalar(PostgresJSON.self)
        #expect(OutcomeStore.parseObject(normalised.text) == values)
        // In binary, as the job reads stored outcomes back.
        let binary = try await pool.withConnection { c -> String? in
            var read: String?
            try c.forEachBinaryRow("SELECT $1::jsonb", [.json(text)]) { read = try $0.json(0) }
            return read
        }
        #expect(binary.map(OutcomeStore.parseObject) == values)
        // Anything but an object of strings gives what strings there are, never a crash.
        let mixed = try await pool.query(#"SELECT '{"a": "b", "n": 1}'::jsonb"#).scalar(PostgresJSON.self)
        #expect(OutcomeStore.parseObject(mixed.text) == ["a": "b"])
        let array = try await pool.query("SELECT '[1]'::jsonb").scalar(PostgresJSON.self)
        #expect(OutcomeStore.parseObject(array.text) == [:])
        await pool.close()
        try await db.drop()
    }
}
