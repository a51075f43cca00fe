import Foundation
import LibPQ
import LocalPostgres
import Testing

@Suite("Results in binary format against a real PostgreSQL")
struct BinaryRowTests {
    @Test("each type reads back in binary as the text result gives it: text, bytea, integers, bool, timestamps, integer and text arrays, jsonb, NULL")
    func binaryMatchesText() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        try await pool.query(
            """
            CREATE TABLE samples (id int4, s text, v varchar(20), b bytea, i2 int2, i8 int8, ok bool, ts timestamptz,
                                  a8 int8[], a4 int4[], a2 int2[], t text[], j jsonb)
            """)
        try await pool.query(
            """
            INSERT INTO samples VALUES
              (1, 'plain', 'v', '\\x00ff10'::bytea, -2, 9223372036854775807, true, '2026-11-21 12:00:00.123456+00',
               '{1,NULL,-5}', '{1,3}', '{7}', '{a,"b c",NULL,""}', '{"k": "v", "n": [1, null]}'),
              (2, 'ünï 北京 🚀 tab	and \\N', '', ''::bytea, 32767, -9223372036854775808, false, '1969-12-31 23:59:59.999999+00',
               '{}', '{}', '{}', '{}', '"北京"'),
              (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
              (4, '', 'x', '\\x'::bytea, 0, 0, true, 'infinity', '{-9223372036854775808,9223372036854775807}', '{-2147483648}', '{-32768}',
               '{"ünï 🚀","tab\tand \\N"}', '{}'),
              (5, 'e', 'y', '\\x01'::bytea, 1, 1, false, '-infinity', '{NULL}', '{NULL,2}', '{NULL}', '{NULL}', 'null')
            """)
        let select = "SELECT id, s, v, b, i2, i8, ok, ts, a8, a4, a2, t, j FROM samples ORDER BY id"
        let (binary, asText) = try await pool.withConnection { c -> ([[String]], [[String]]) in
            var binary: [[String]] = []
            try c.forEachBinaryRow(select) { row in
                #expect(row.count == 13)
                func show<T>(_ value: T?) -> String { value.map { "\($0)" } ?? "NULL" }
                binary.append([
                    show(try row.int(0)), show(try row.text(1)), show(try row.text(2)),
                    show(try row.bytes(3)?.map { String(format: "%02x", $0) }.joined()), show(try row.int(4)), show(try row.int(5)),
                    show(try row.bool(6)), show(try row.timestamp(7)),
                    show(try row.integers(8)?.map(show)), show(try row.integers(9)?.map(show)), show(try row.integers(10)?.map(show)),
                    show(try row.texts(11)?.map(show)), show(try row.json(12)),
                ])
                #expect(row.isNull(1) == (try row.text(1) == nil))
            }
            var asText: [[String]] = []
            for row in try c.query(select).rows {
                func show<T>(_ value: T?) -> String { value.map { "\($0)" } ?? "NULL" }
                func integers(_ index: Int) throws -> String {
                    show(try row.decode(PostgresArrayText?.self, at: index).map { $0.integers()?.map(show) ?? [] })
                }
                asText.append([
                    show(try row.decode(Int?.self, at: 0)), show(try row.decode(String?.self, at: 1)),
                    show(try row.decode(String?.self, at: 2)),
                    show(try row.decode(PostgresBytes?.self, at: 3)?.bytes.map { String(format: "%02x", $0) }.joined()),
                    show(try row.decode(Int?.self, at: 4)), show(try row.decode(Int?.self, at: 5)), show(try row.decode(Bool?.self, at: 6)),
                    show(try row.decode(PostgresTimestamp?.self, at: 7)?.microseconds),
                    try integers(8), try integers(9), try integers(10),
                    show(try row.decode(PostgresArrayText?.self, at: 11)?.elements.map(show)),
                    show(try row.decode(PostgresJSON?.self, at: 12)?.text),
                ])
            }
            return (binary, asText)
        }
        #expect(binary.count == 5)
        #expect(binary == asText)
        #expect(binary[0][7] == "1795262400123456")
        #expect(binary[1][7] == "-1")  // a microsecond before the Unix epoch
        #expect(binary[3][7] == "\(Int64.max)")
        await pool.close()
        try await db.drop()
    }

    @Test("a column read as another type, a column out of range and a two-dimensional array are errors naming the column; the connection stays usable")
    func mismatchesNameTheColumn() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        try await pool.withConnection { c in
            func failure(_ read: (BinaryRow) throws -> Void) -> String {
                do {
                    try c.forEachBinaryRow("SELECT 'x'::text AS word, 5::int4 AS number, '{{1,2},{3,4}}'::int8[] AS grid", [], read)
                    return "no error"
                } catch {
                    return String(reflecting: error)  // the message; `description` names only the kind
                }
            }
            #expect(failure { _ = try $0.int(0) }.contains("'word': expected an integer"))
            #expect(failure { _ = try $0.text(1) }.contains("'number': expected text"))
            #expect(failure { _ = try $0.timestamp(1) }.contains("'number': expected timestamptz"))
            #expect(failure { _ = try $0.integers(2) }.contains("'grid': expected a one-dimensional array"))
            #expect(failure { _ = try $0.text(3) }.contains("out of range"))
            #expect(failure { _ = try $0.text(0) } == "no error")
            var read: [Int] = []
            try c.forEachBinaryRow("SELECT g FROM generate_series(1, $1::int4) AS g", [.int(3)]) { read.append(try $0.int(0) ?? -1) }
            #expect(read == [1, 2, 3])
        }
        await pool.close()
        try await db.drop()
    }

    @Test("a statement that fails is thrown with its SQLSTATE, rows stream one at a time when asked, a caller's error stops the stream, and the connection stays usable")
    func errorsAndStreaming() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        struct Stop: Error {}
        try await pool.withConnection { c in
            for streaming in [false, true] {
                #expect(throws: PostgresError.self) { try c.forEachBinaryRow("SELECT * FROM no_such_table", streaming: streaming) { _ in } }
                var read: [Int] = []
                try c.forEachBinaryRow("SELECT g FROM generate_series(1, $1::int4) AS g", [.int(50_000)], streaming: streaming) {
                    read.append(try $0.int(0) ?? -1)
                }
                #expect(read == Array(1...50_000))
                var seen = 0
                #expect(throws: Stop.self) {
                    try c.forEachBinaryRow("SELECT g FROM generate_series(1, 1000000) AS g", streaming: streaming) { _ in
                        seen += 1
                        if seen == 10 { throw Stop() }
                    }
                }
                #expect(seen == 10)
                var count = 0
                try c.forEachBinaryRow("SELECT 1") { _ in count += 1 }
                #expect(count == 1)
            }
        }
        await pool.close()
        try await db.drop()
    }
}
