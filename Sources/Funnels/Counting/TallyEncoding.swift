/// The stored form of a `FunnelTally` (`funnel_tallies.tally`): unsigned
/// LEB128 varints, durations sorted and delta-coded. A day of a busy funnel
/// holds one duration per completer and one gap per person and step, and the
/// printed report reads every day of every funnel, so the form is chosen for
/// size: a typical gap takes three bytes instead of a JSON number's ten.
package enum TallyEncoding {
    /// 2 adds the per-app-version counts, 3 the per-step counts of each
    /// breakdown value; 1 and 2 (written before them) still read, without them.
    package static let version: UInt8 = 3

    /// The tally's bytes; `as` an earlier version writes them as that one
    /// did, without what came after it (for the tests of reading them).
    package static func encode(_ tally: FunnelTally, as written: UInt8 = version) -> [UInt8] {
        var out: [UInt8] = [written]
        out.reserveCapacity(16 + 3 * (tally.durations.count + tally.steps.reduce(0) { $0 + $1.gaps.count }))
        for count in [tally.started, tally.completed, tally.inProgress, tally.excluded] { put(UInt64(count), &out) }
        putSorted(tally.durations, &out)
        put(UInt64(tally.steps.count), &out)
        for step in tally.steps {
            for count in [step.persons, step.dropOff, step.inProgress] { put(UInt64(count), &out) }
            putSorted(step.gaps, &out)
        }
        put(UInt64(tally.cohorts.count), &out)
        for (day, cohort) in tally.cohorts.sorted(by: { $0.key < $1.key }) {
            put(day, &out)
            for count in [cohort.started, cohort.completed, cohort.inProgressPersons] { put(UInt64(count), &out) }
            put(zigzag(cohort.endOfDay), &out)
        }
        put(UInt64(tally.breakdowns.count), &out)
        for (dimension, groups) in tally.breakdowns.sorted(by: { $0.key < $1.key }) {
            put(dimension, &out)
            put(UInt64(groups.count), &out)
            for (value, group) in groups.sorted(by: { $0.key < $1.key }) {
                put(value, &out)
                for count in [group.started, group.completed, group.inProgress] { put(UInt64(count), &out) }
                guard written >= 3 else { continue }
                put(UInt64(group.steps.count), &out)
                for step in group.steps {
                    for count in [step.persons, step.dropOff, step.inProgress] { put(UInt64(count), &out) }
                }
            }
        }
        guard written >= 2 else { return out }
        put(UInt64(tally.versions.count), &out)
        for (value, version) in tally.versions.sorted(by: { $0.key < $1.key }) {
            put(value, &out)
            for count in [version.started, version.completed] + version.reached { put(UInt64(count), &out) }
            putSorted(version.durations, &out)
        }
        return out
    }

    /// Bytes this version did not write, or damaged ones.
    package struct Unreadable: Error, CustomStringConvertible, Sendable {
        package let description: String
    }

    /// Reads a tally of `funnel` back; throws `Unreadable` on bytes this version did not write.
    package static func decode(_ bytes: [UInt8], funnel: Funnel) throws -> FunnelTally {
        var reader = Reader(bytes: bytes)
        let stored = try reader.byte()
        guard (1...version).contains(stored) else { throw reader.error("unknown version") }
        var tally = FunnelTally(funnel: funnel)
        tally.started = try reader.count()
        tally.completed = try reader.count()
        tally.inProgress = try reader.count()
        tally.excluded = try reader.count()
        tally.durations = try reader.sorted()
        let stepCount = try reader.count()
        guard stepCount == tally.steps.count else {
            throw reader.error("\(stepCount) steps stored, funnel '\(funnel.name)' has \(tally.steps.count)")
        }
        for index in tally.steps.indices {
            tally.steps[index] = FunnelTally.Step(
                persons: try reader.count(), dropOff: try reader.count(), inProgress: try reader.count(), gaps: try reader.sorted())
        }
        for _ in 0..<(try reader.count()) {
            let day = try reader.string()
            tally.cohorts[day] = FunnelTally.Cohort(
                started: try reader.count(), completed: try reader.count(), inProgressPersons: try reader.count(),
                endOfDay: unzigzag(try reader.varint()))
        }
        for _ in 0..<(try reader.count()) {
            let dimension = try reader.string()
            var groups: [String: FunnelTally.Group] = [:]
            for _ in 0..<(try reader.count()) {
                let value = try reader.string()
                var group = FunnelTally.Group(started: try reader.count(), completed: try reader.count(), inProgress: try reader.count())
                if stored >= 3 {
                    group.steps = try (0..<(try reader.count())).map { _ in
                        FunnelTally.Step(persons: try reader.count(), dropOff: try reader.count(), inProgress: try reader.count())
                    }
                }
                groups[value] = group
            }
            tally.breakdowns[dimension] = groups
        }
        if stored >= 2 {
            for _ in 0..<(try reader.count()) {
                let value = try reader.string()
                let started = try reader.count(), completed = try reader.count()
                let reached = try tally.steps.indices.map { _ in try reader.count() }
                tally.versions[value] = FunnelTally.Version(started: started, completed: completed, reached: reached, durations: try reader.sorted())
            }
        }
        guard reader.atEnd else { throw reader.error("trailing bytes") }
        return tally
    }

    private static func put(_ value: UInt64, _ out: inout [UInt8]) {
        var rest = value
        while rest >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        out.append(UInt8(rest))
    }

    private static func put(_ text: String, _ out: inout [UInt8]) {
        put(UInt64(text.utf8.count), &out)
        out.append(contentsOf: text.utf8)
    }

    /// Ascending values as the first one then the differences, each zigzagged
    /// (durations can be negative only through clock damage, but must survive it).
    private static func putSorted(_ values: [Int64], _ out: inout [UInt8]) {
        let sorted = values.sorted()
        put(UInt64(sorted.count), &out)
        var previous: Int64 = 0
        for value in sorted {
            put(zigzag(value &- previous), &out)
            previous = value
        }
    }

    private static func zigzag(_ value: Int64) -> UInt64 { UInt64(bitPattern: (value << 1) ^ (value >> 63)) }
    private static func unzigzag(_ value: UInt64) -> Int64 { Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1) }

    private struct Reader {
        let bytes: [UInt8]
        var position = 0

        var atEnd: Bool { position == bytes.count }

        func error(_ reason: String) -> Unreadable {
            Unreadable(description: "funnel_tallies: unreadable tally at byte \(position): \(reason)")
        }

        mutating func byte() throws -> UInt8 {
            guard position < bytes.count else { throw error("ends early") }
            defer { position += 1 }
            return bytes[position]
        }

        mutating func varint() throws -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let next = try byte()
                guard shift < 64 else { throw error("varint too long") }
                value |= UInt64(next & 0x7f) << shift
                if next < 0x80 { return value }
                shift += 7
            }
        }

        mutating func count() throws -> Int {
            let value = try varint()
            guard value <= UInt64(Int32.max) else { throw error("count \(value) out of range") }
            return Int(value)
        }

        mutating func string() throws -> String {
            let length = try count()
            guard length <= bytes.count - position else { throw error("string runs past the end") }
            defer { position += length }
            return String(decoding: bytes[position..<(position + length)], as: UTF8.self)
        }

        mutating func sorted() throws -> [Int64] {
            let length = try count()
            guard length <= bytes.count - position else { throw error("list longer than the bytes left") }
            var values: [Int64] = []
            values.reserveCapacity(length)
            var previous: Int64 = 0
            for _ in 0..<length {
                previous = previous &+ unzigzag(try varint())
                values.append(previous)
            }
            return values
        }
    }
}
