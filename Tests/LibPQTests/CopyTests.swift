import CivilDate
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

    @Test("binary COPY TO STDOUT reads back text, NULL and timestamps as stored, row by row, and stops at the end marker")
    func binaryCopyOutRoundTrip() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        try await pool.query("CREATE TABLE stored (id int8 PRIMARY KEY, s text, ts timestamptz)")
        let values: [(String?, Int64?)] = [
            ("plain", 1_795_338_978_638_928), ("", 0), (nil, nil), ("tab\there\nand \\N", -1),  // before both epochs
            ("ünï 北京 🚀", 946_684_800_000_000), ("\\N", Int64.max), ("late", Int64.min),
        ]
        try await pool.withConnection { c in
            _ = try c.copyIn("COPY stored FROM STDIN") { writer in
                for (i, (s, ts)) in values.enumerated() {
                    let time: PostgresValue = switch ts {
                    case Int64.max?: .text("infinity")
                    case Int64.min?: .text("-infinity")
                    case let ts?: .microseconds(ts)
                    case nil: .null
                    }
                    try writer.writeRow([.int(Int64(i)), s.map { .text($0) } ?? .null, time])
                }
            }
        }
        let (read, ends) = try await pool.withConnection { c -> ([(String?, Int64?)], Int) in
            var row = BinaryCopyFields()
            var read: [(String?, Int64?)] = []
            var ends = 0
            try c.copyOut("COPY (SELECT s, ts, id FROM stored ORDER BY id) TO STDOUT (FORMAT binary)") { message in
                guard try row.read(message) else {
                    ends += 1
                    return
                }
                #expect(row.count == 3)
                read.append((row.text(0), row.timestamp(1)))
                #expect(row.bytes(2)?.count == 8)
            }
            return (read, ends)
        }
        #expect(read.map(\.0) == values.map(\.0))
        #expect(read.map(\.1) == values.map(\.1))
        #expect(ends == 1)
        await pool.close()
        try await db.drop()
    }

    @Test("binary COPY stores every type as PostgreSQL reads the same values from text, and refuses a NUL")
    func binaryCopyMatchesText() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        let columns = "id int4, s text, d date, b bool, f float8, ts timestamptz, a8 int8[], a4 int4[], j jsonb"
        try await pool.query("CREATE TABLE viabinary (\(columns))")
        try await pool.query("CREATE TABLE viatext (\(columns))")
        struct Sample: Sendable {
            let s: String, day: (Int64, Int64, Int64), b: Bool, f: Double?, ts: Int64?, a8: [Int64?], a4: [Int32], j: String
        }
        let samples = [
            Sample(s: "plain", day: (2026, 11, 21), b: true, f: 1.5, ts: 1_795_338_978_638_928, a8: [1, nil, -5], a4: [1, 3],
                   j: #"{"a": "b"}"#),
            // Before PostgreSQL's epoch (2000) and the Unix one, empty arrays, extremes.
            Sample(s: "ünï 北京 🚀\ttab\\slash\nline", day: (1999, 12, 31), b: false, f: nil, ts: -1, a8: [], a4: [],
                   j: "{}"),
            Sample(s: "", day: (1970, 1, 1), b: true, f: -0.25, ts: nil, a8: [nil, nil, Int64.max, Int64.min],
                   a4: [Int32.max, Int32.min], j: #"{"k": "v\"q ✓", "n": [1, 2.5, null]}"#),
        ]
        var binary = BinaryCopyRows()
        var text = CopyRows()
        for (i, sample) in samples.enumerated() {
            let days = CivilDate.days(year: sample.day.0, month: sample.day.1, day: sample.day.2)
            binary.startRow(fields: 9)
            binary.append(int32: Int32(i))
            let textFits = binary.append(text: sample.s)
            binary.append(date: days)
            binary.append(bool: sample.b)
            binary.append(double: sample.f)
            binary.append(timestamp: sample.ts)
            binary.append(int8Array: sample.a8)
            binary.append(int4Array: sample.a4)
            let jsonFits = binary.append(jsonb: sample.j)
            #expect(textFits && jsonFits)
            try text.append([
                .int(Int64(i)), .text(sample.s), .text(String(Timestamps.format(microseconds: days * 86_400_000_000).prefix(10))), .bool(sample.b),
                sample.f.map { .double($0) } ?? .null, sample.ts.map { .microseconds($0) } ?? .null,
                .text("{" + sample.a8.map { $0.map(String.init) ?? "NULL" }.joined(separator: ",") + "}"),
                .text("{" + sample.a4.map(String.init).joined(separator: ",") + "}"), .json(sample.j),
            ])
        }
        let (viaBinary, viaText) = (binary, text)
        let stored = try await pool.withConnection { c in
            try c.copyIn("COPY viabinary FROM STDIN (FORMAT binary)") { try $0.write(viaBinary) }
        }
        #expect(stored == samples.count)
        try await pool.withConnection { c in _ = try c.copyIn("COPY viatext FROM STDIN") { try $0.write(viaText) } }
        let dump = "SELECT string_agg(t::text, E'\\n' ORDER BY id) FROM %@ t"
        let fromBinary = try await pool.query(dump.replacingOccurrences(of: "%@", with: "viabinary")).scalar(String.self)
        #expect(fromBinary == (try await pool.query(dump.replacingOccurrences(of: "%@", with: "viatext")).scalar(String.self)))
        #expect(fromBinary.contains("1999-12-31") && fromBinary.contains("1969-12-31 23:59:59.999999+00"))
        #expect(try await pool.query("SELECT a8[3] FROM viabinary WHERE id = 2").scalar(Int64.self) == Int64.max)

        var refused = BinaryCopyRows()
        refused.startRow(fields: 1)
        let nulText = refused.append(text: "nul\u{0}inside")
        let nulJSON = refused.append(jsonb: "{\"nul\": \"\u{0}\"}")
        #expect(!nulText && !nulJSON)
        await pool.close()
        try await db.drop()
    }
}
