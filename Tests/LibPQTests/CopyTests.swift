import Foundation
import LibPQ
import LocalPostgres
import Testing

@Suite("COPY FROM STDIN and COPY TO STDOUT")
struct CopyTests {
    @Test("COPY of 100,000 rows lands every row, escapes intact")
    func hundredThousandRows() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        try await pool.query("CREATE TABLE items (id int8 PRIMARY KEY, label text, payload jsonb, note text)")
        let stored = try await pool.withConnection { c in
            try c.copyIn("COPY items (id, label, payload, note) FROM STDIN") { writer in
                for i in 0..<100_000 {
                    try writer.writeRow([
                        .int(Int64(i)), .text("row \(i)\ttab\\slash\nnewline ✓"), .json(#"{"n": \#(i)}"#),
                        i % 7 == 0 ? .null : .text("n"),
                    ])
                }
            }
        }
        #expect(stored == 100_000)
        let row = try #require(
            try await pool.query(
                "SELECT count(*) AS n, sum(id) AS s, count(note) AS notes, sum((payload->>'n')::int8) AS js FROM items"
            ).first)
        #expect(try row.decode(Int.self, "n") == 100_000)
        #expect(try row.decode(Double.self, "s") == 4_999_950_000)
        #expect(try row.decode(Int.self, "notes") == 100_000 - 14_286)
        #expect(try row.decode(Double.self, "js") == 4_999_950_000)
        let label = try await pool.query("SELECT label FROM items WHERE id = 4242").scalar(String.self)
        #expect(label == "row 4242\ttab\\slash\nnewline ✓")
        await pool.close()
        try await db.drop()
    }

    @Test("a server error during COPY surfaces with its SQLSTATE and nothing lands")
    func serverErrorSurfaces() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        try await pool.query("CREATE TABLE items (id int8 PRIMARY KEY)")
        let error = await #expect(throws: PostgresError.self) {
            try await pool.withConnection { c in
                try c.copyIn("COPY items (id) FROM STDIN") { writer in
                    try writer.writeRow([.int(1)])
                    try writer.writeRow([.int(1)])  // duplicate key
                }
            }
        }
        #expect(error?.sqlState == SQLState.uniqueViolation)
        #expect(try await pool.query("SELECT count(*) FROM items").scalar(Int.self) == 0)
        #expect(try await pool.query("SELECT 1").scalar(Int.self) == 1)
        await pool.close()
        try await db.drop()
    }

    struct WriterGaveUp: Error {}

    @Test("a caller's error aborts the COPY, is rethrown as is, and the connection stays usable")
    func callerErrorAborts() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        try await pool.query("CREATE TABLE items (id int8)")
        await #expect(throws: WriterGaveUp.self) {
            try await pool.withConnection { c in
                try c.copyIn("COPY items (id) FROM STDIN") { writer in
                    for i in 0..<10_000 { try writer.writeRow([.int(Int64(i))]) }
                    throw WriterGaveUp()
                }
            }
        }
        #expect(try await pool.query("SELECT count(*) FROM items").scalar(Int.self) == 0)
        await pool.close()
        try await db.drop()
    }

    @Test("COPY TO STDOUT streams the output and rows stream one at a time")
    func copyOutAndStreaming() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        let (bytes, lines, streamed, sum) = try await pool.withConnection { c -> (Int, Int, Int, Int64) in
            var lines = 0
            let bytes = try c.copyOut("COPY (SELECT g, 'x' || g FROM generate_series(1, 50000) g) TO STDOUT") { chunk in
                lines += chunk.reduce(0) { $0 + ($1 == 10 ? 1 : 0) }
            }
            var streamed = 0
            var sum: Int64 = 0
            try c.forEachRow("SELECT g FROM generate_series(1, $1::int) g", [.int(30000)]) { row in
                streamed += 1
                sum += try row.decode(Int64.self, at: 0)
            }
            return (bytes, lines, streamed, sum)
        }
        #expect(lines == 50_000)
        #expect(bytes > 50_000 * 4)
        #expect(streamed == 30_000)
        #expect(sum == 30_000 * 30_001 / 2)
        await pool.close()
        try await db.drop()
    }

    @Test("COPY TO STDOUT lines decode to the stored values, escapes and NULL included, and rows rendered apart are sent whole")
    func copyTextRoundTrip() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        try await pool.query("CREATE TABLE tricky (id int8 PRIMARY KEY, a text, b text)")
        let values: [String?] = [
            "plain", "", nil, "tab\there", "new\nline", "cr\rreturn", "back\\slash", "\\N", "\u{08}\u{0C}\u{0B}controls",
            "ünï 北京 🚀", "trailing\\", "\t", "a\tb\tc",
        ]
        // Rendered with no connection, then sent in one piece.
        var rows = CopyRows()
        for (i, value) in values.enumerated() {
            try rows.append([.int(Int64(i)), value.map { .text($0) } ?? .null, .text("b\(i)")])
        }
        let rendered = rows
        let stored = try await pool.withConnection { c in try c.copyIn("COPY tricky (id, a, b) FROM STDIN") { try $0.write(rendered) } }
        #expect(stored == values.count)
        let (decoded, firsts) = try await pool.withConnection { c -> ([[String?]], [String]) in
            var decoded: [[String?]] = []
            var firsts: [String] = []
            try c.copyOut("COPY (SELECT a, b, id FROM tricky ORDER BY id) TO STDOUT") { line in
                var fields: [String?] = []
                CopyText.fields(of: line, into: &fields)
                decoded.append(fields)
                firsts.append(String(decoding: CopyText.firstField(of: line), as: UTF8.self))
            }
            return (decoded, firsts)
        }
        #expect(decoded.map { $0[0] } == values)
        #expect(decoded.map { $0[1] } == values.indices.map { "b\($0)" })
        #expect(decoded.map { $0[2] } == values.indices.map { String($0) })
        #expect(firsts[2] == "\\N")  // undecoded: the escape as sent
        #expect(firsts[3] == "tab\\there")
        await pool.close()
        try await db.drop()
    }
}
