import Funnels
import LibPQ
import LogReading

/// `audience_spans`: for every unit (person or group) the job evaluated, the
/// intervals in which it is in each audience of its app if nothing new
/// arrives (`AudienceSpans`). Written beside its funnel rows by the pass that
/// evaluates it, deleted with them: a rebuild empties the table, a pass
/// recomputing an app's funnels deletes the app's, an incremental run the
/// touched persons'.
enum AudienceSpanStore {
    static let copyStatement = "COPY audience_spans (app, person_id, audience, enters_at, leaves_at) FROM STDIN (FORMAT binary)"

    /// Appends `unit`'s spans in each of `audiences` (of its app, counting its kind of unit).
    static func append(
        person: String, audiences: [Audience], unit: AudienceSpans.Unit, now: Int64, spans: inout AudienceSpans,
        to rows: inout BinaryCopyRows
    ) {
        for audience in audiences {
            for span in spans.spans(of: audience, unit: unit, now: now) {
                rows.startRow(fields: 5)
                _ = rows.append(text: audience.app)
                _ = rows.append(text: person)
                _ = rows.append(text: audience.name)
                rows.append(timestamp: span.enters)
                rows.append(timestamp: span.leaves)
            }
        }
    }

    /// Deletes the spans of the incremental run's `touched` persons, who are evaluated again.
    static func deleteTouched(_ c: Connection, dialect: SQLDialect) throws {
        try c.query(dialect.delete(from: "audience_spans"))
    }
}
