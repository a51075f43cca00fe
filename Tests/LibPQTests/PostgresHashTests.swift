import LibPQ
import LocalPostgres
import Testing

@Suite("PostgreSQL's text hash, computed by the client")
struct PostgresHashTests {
    @Test("hashtextextended(text, 0) of texts of every length up to 80, in several scripts and with control bytes, equals the server's")
    func equalsTheServers() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        let alphabet = Array("abcXYZ019 -_.\t\\\"'é✓😀\u{1}\u{1F}")
        var texts = ["", "a", "anonymous-id", "user@example.com", "track\u{1F}onboarding_started\u{1F}2.3.0\u{1F}iOS"]
        // Three texts of each length, their characters stepping through the alphabet at different strides.
        for length in 0...80 {
            for stride in [1, 5, 7] {
                texts.append(String((0..<length).map { alphabet[($0 * stride + length) % alphabet.count] }))
            }
        }
        let server = try await pool.query(
            "SELECT hashtextextended(t, 0) FROM unnest($1::text[]) WITH ORDINALITY AS u(t, n) ORDER BY n", [.textArray(texts)]
        ).rows.map { try $0.decode(Int64.self, at: 0) }
        #expect(server.count == texts.count)
        for (text, expected) in zip(texts, server) {
            #expect(PostgresHash.textExtended(Array(text.utf8)) == expected, "\(text.debugDescription)")
        }
        await pool.close()
        try await db.drop()
    }
}
