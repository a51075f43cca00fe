import Foundation
import LibPQ
import LocalPostgres
import Testing

@Suite("Parameters and decoding against a real PostgreSQL")
struct ParameterTests {
    @Test(
        "text parameters round-trip unchanged",
        arguments: [
            "it's \"quoted\"", #"back\slash \\ and \n literal"#, "tab\tnew\nline\r", "ünïcödé — ß 北京",
            "emoji 👩‍👩‍👧‍👦 🚀", "", "'; DROP TABLE x; --", String(repeating: "long ", count: 5000),
        ])
    func textRoundTrip(_ value: String) async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        let echoed = try await pool.query("SELECT $1::text AS v, length($1::text) AS n", [.text(value)])
        #expect(try echoed.first?.decode(String.self, "v") == value)
        #expect(try echoed.first?.decode(Int.self, "n") == value.unicodeScalars.count)  // PostgreSQL counts code points
        try await pool.query("CREATE TABLE t (v text)")
        try await pool.query("INSERT INTO t VALUES ($1)", [.text(value)])
        #expect(try await pool.query("SELECT v FROM t").scalar(String.self) == value)
        await pool.close()
        try await db.drop()
    }

    @Test("a NUL byte in text, or in an element of a text array, is refused with a clear error, and the connection stays usable",
        arguments: [("text", PostgresValue.text("bad\u{0}byte")), ("text[]", .textArray(["ok", "bad\u{0}byte"]))])
    func nulByte(_ type: String, _ bad: PostgresValue) async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        let error = await #expect(throws: PostgresError.self) {
            try await pool.query("SELECT $1::text, $2::\(type)", [.text("fine"), bad])
        }
        #expect(error?.code == .invalidParameter)
        #expect(error?.message.contains("$2") == true)
        #expect(error?.message.contains("NUL") == true)
        #expect(try await pool.query("SELECT 1").scalar(Int.self) == 1)
        await pool.close()
        try await db.drop()
    }

    @Test("typed decoding of every supported type, NULL included")
    func typedDecoding() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        let id = UUID()
        let result = try await pool.query(
            """
            SELECT 'hello'::text AS t, 42::int4 AS i4, 9007199254740993::int8 AS i8, 2.5::float8 AS f,
                   true AS b, '2025-11-21 10:00:01.234567+00'::timestamptz AS ts, $1::uuid AS u,
                   '{"a": [1, "x"]}'::jsonb AS j, NULL::int8 AS n, '\\x00ff10'::bytea AS bytes,
                   $2::timestamptz AS bound_ts
            """, [.uuid(id), .microseconds(1_763_719_201_234_567)])
        let row = try #require(result.first)
        #expect(try row.decode(String.self, "t") == "hello")
        #expect(try row.decode(Int32.self, "i4") == 42)
        #expect(try row.decode(Int64.self, "i8") == 9_007_199_254_740_993)
        #expect(try row.decode(Double.self, "f") == 2.5)
        #expect(try row.decode(Bool.self, "b") == true)
        #expect(try row.decode(PostgresTimestamp.self, "ts").microseconds == 1_763_719_201_234_567)
        #expect(try row.decode(PostgresTimestamp.self, "bound_ts").microseconds == 1_763_719_201_234_567)
        #expect(try row.decode(UUID.self, "u") == id)
        let json = try row.decode(PostgresJSON.self, "j")
        #expect(json.text == #"{"a": [1, "x"]}"#)
        #expect(try row.decode(Int64?.self, "n") == nil)
        #expect(try row.decode(PostgresBytes.self, "bytes").bytes == [0, 255, 16])
        // Every byte value, bound and read back; and what is not PostgreSQL's hex is refused.
        let all = (0...255).map(UInt8.init) + (0...255).reversed().map(UInt8.init)
        let echoed = try #require(try await pool.query("SELECT $1::bytea", [.bytes(all)]).first)
        #expect(try echoed.decode(PostgresBytes.self, at: 0).bytes == all)
        #expect(PostgresBytes.decode(text: "\\xABcd")?.bytes == [0xab, 0xcd])
        for bad in ["\\x0", "\\xzz", "\\x0g", "00ff", "\\"] { #expect(PostgresBytes.decode(text: bad) == nil, "\(bad)") }
        await pool.close()
        try await db.drop()
    }

    @Test("decoding a column as the wrong type, or NULL as non-optional, names the column and types")
    func mismatch() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        let row = try #require(try await pool.query("SELECT 7::int4 AS count, NULL::text AS missing").first)
        let wrongType = #expect(throws: PostgresError.self) { try row.decode(String.self, "count") }
        #expect(wrongType?.code == .decoding)
        #expect(wrongType?.message == "column 'count' is int4, cannot decode it as String")
        let null = #expect(throws: PostgresError.self) { try row.decode(String.self, "missing") }
        #expect(null?.message.contains("'missing' is NULL") == true)
        let unknown = #expect(throws: PostgresError.self) { try row.decode(Int.self, "nope") }
        #expect(unknown?.message.contains("no column named 'nope'") == true)
        await pool.close()
        try await db.drop()
    }

    @Test("binary, array, boolean and numeric parameters")
    func otherParameters() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        let row = try #require(
            try await pool.query(
                "SELECT length($1::bytea) AS n, $2::text[] @> ARRAY['b\"q']::text[] AS has, $3::bool AS b, $4::float8 * 2 AS d, $5::int8 + 1 AS i, $6::jsonb ->> 'k' AS k",
                [.bytes([0, 1, 2, 0]), .textArray(["a", "b\"q", "c\\d", "{}"]), .bool(false), .double(1.25), .int(Int64.max - 1), .json(#"{"k":"v"}"#)]
            ).first)
        #expect(try row.decode(Int.self, "n") == 4)
        #expect(try row.decode(Bool.self, "has") == true)
        #expect(try row.decode(Bool.self, "b") == false)
        #expect(try row.decode(Double.self, "d") == 2.5)
        #expect(try row.decode(Int64.self, "i") == Int64.max)
        #expect(try row.decode(String.self, "k") == "v")
        // Integer arrays: as an int8[] parameter, extremes and negatives exact, and an empty one.
        let ints = try #require(
            try await pool.query(
                "SELECT $1 = ARRAY[-9223372036854775808, -1, 0, 9223372036854775807]::int8[] AS same, cardinality($2) AS n",
                [.intArray([Int64.min, -1, 0, Int64.max]), .intArray([Int]())]
            ).first)
        #expect(try ints.decode(Bool.self, "same") == true)
        #expect(try ints.decode(Int.self, "n") == 0)
        await pool.close()
        try await db.drop()
    }

    @Test("text arrays arrive element for element (quotes, backslashes, braces, commas, NULL's spelling, empty strings, non-ASCII), and an empty one is empty")
    func textArrays() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        let items = ["a", "b\"q", "c\\d", "{}", "x,y", "NULL", "", " padded ", "zoë 🚀", String(repeating: "k", count: 10_000)]
        let rows = try await pool.query(
            "SELECT t.item, t.n FROM unnest($1::text[]) WITH ORDINALITY AS t(item, n) ORDER BY t.n", [.textArray(items)])
        #expect(try rows.rows.map { try $0.decode(String.self, "item") } == items)
        // Cast on the server as the job casts its days (`$2::date[]`), and empty.
        let row = try #require(
            try await pool.query(
                "SELECT ($1::date[])[2] = DATE '2026-11-24' AS day, cardinality($2::text[]) AS n",
                [.textArray(["2026-11-23", "2026-11-24"]), .textArray([])]
            ).first)
        #expect(try row.decode(Bool.self, "day") == true)
        #expect(try row.decode(Int.self, "n") == 0)
        await pool.close()
        try await db.drop()
    }

    @Test("timestamps format and parse exactly", arguments: [
        (Int64(0), "1970-01-01T00:00:00.000000Z"), (1_763_719_201_234_567, "2025-11-21T10:00:01.234567Z"),
        (-1, "1969-12-31T23:59:59.999999Z"),
    ])
    func timestamps(_ us: Int64, _ text: String) {
        #expect(Timestamps.format(microseconds: us) == text)
        #expect(Timestamps.parse(text) == us)
        #expect(Timestamps.parse("2026-11-21 10:00:01.5+05:30") == Timestamps.parse("2026-11-21T04:30:01.500000Z"))
        #expect(Timestamps.parse("2026-13-01 00:00:00+00") == nil)
        #expect(Timestamps.parse("2025-02-29 00:00:00+00") == nil)
        #expect(Timestamps.parse("infinity") == Int64.max && Timestamps.parse("-infinity") == Int64.min)
        #expect(Timestamps.parse("2026-11-21 10:00:01") == Timestamps.parse("2026-11-21 10:00:01+00"))  // no zone: UTC
    }
}
