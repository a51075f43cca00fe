import LibPQ
import LocalPostgres
import Testing

@Suite("PostgreSQL's text hash, computed by the client")
struct PostgresHashTests {
    @Test("hashtextextended(text, 0) of texts of every length up to 80, in several scripts and with control bytes, equals the server's")
    func equalsTheServers() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        var rng = SplitMix(seed: 31)
        let alphabet = Array("abcXYZ019 -_.\t\\\"'é✓😀\u{1}\u{1F}")
        var texts = ["", "a", "anonymous-id", "user@example.com", "track\u{1F}onboarding_started\u{1F}2.3.0\u{1F}iOS"]
        for length in 0...80 {
            for _ in 0..<3 {
                texts.append(String((0..<length).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }))
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

/// A small deterministic generator, so a failure names the same texts every run.
private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
