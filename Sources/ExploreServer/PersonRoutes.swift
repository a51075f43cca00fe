import Explore
import Foundation
import Funnels
import Hummingbird
import LibPQ
import NIOCore
import Reports

/// The persons behind the explorer's numbers (docs/explore.md, "The
/// persons behind a bar"), each asked with the funnel it is about, as
/// `POST /api/queries` takes it (`definition`, `from`, `to`):
///
/// - `POST /api/persons` with `persons` (`dropped:3`), optionally
///   `breakdown_value`, `offset` and `limit` (100, at most 1,000): a page of
///   the cell's persons, the total, the next page's offset and the command
///   that lists them in a terminal; with `"format": "csv"` the whole list,
///   streamed.
/// - `POST /api/paths` with `step` (and `horizon`, e.g. `1h`): where those
///   who dropped there went next.
/// - `POST /api/person-events` with `app`, `ids` and `from`/`to` (times):
///   one person's events, for the panel's history.
///
/// Each is counted as `onramp funnel --persons` and `--paths-after` count
/// it (and kept, so a second page reads what the first counted).
enum PersonRoutes {
    static let pageLimit = 1_000

    static func add(to router: Router<BasicRequestContext>, pool: ConnectionPool, explorer: Explorer, configuration: ExploreConfiguration) {
        router.post("/api/persons") { request, _ -> Response in
            let object: [String: Any], query: FunnelQuery
            switch try await read(request, configuration: configuration) {
            case .success(let read): (object, query) = read
            case .failure(let refusal): return refusal.response
            }
            let cell: PersonCell
            do {
                cell = try PersonCell.parse(object["persons"] as? String ?? "", breakdownValue: object["breakdown_value"] as? String, in: query.funnel)
            } catch {
                return ExploreResponse.error(.badRequest, "persons: \(error)")
            }
            let offset = max(0, object["offset"] as? Int ?? 0), limit = min(pageLimit, max(1, object["limit"] as? Int ?? 100))
            let analysis = PersonListAnalysis(cell: cell, funnel: query.funnel)
            var asked = query
            asked.analyses = [analysis]
            let question = asked
            let persons: [ListedPerson], report: FunnelReport
            do {
                let answer = try await pool.withConnection { c in try explorer.answer(question, on: c) }
                (persons, report) = (analysis.persons(of: answer.days(of: analysis)), answer.report)
            } catch let error as ExploreError {
                return ExploreResponse.error(error.status, error.description)
            }
            do {
                try cell.check(against: report)
            } catch {
                return ExploreResponse.error(.badRequest, "\(error)")
            }
            let about = PersonListText.About(funnel: query.funnel, cell: cell, traits: [], asOf: query.now)
            if object["format"] as? String == "csv" {
                return csv(persons, about: about)
            }
            var text = PersonListText(format: .json, about: about)
            var out = text.start()
            for person in persons.dropFirst(offset).prefix(limit) { out += text.add(person) }
            let next = offset + limit < persons.count ? "\(offset + limit)" : "null"
            out += "],\"total\":\(persons.count),\"offset\":\(offset),\"next\":\(next),\"command\":"
                + JSONText.string(command(query, cell: cell)) + "}"
            return ExploreResponse.json(out)
        }
        router.post("/api/paths") { request, _ -> Response in
            let object: [String: Any], query: FunnelQuery
            switch try await read(request, configuration: configuration) {
            case .success(let read): (object, query) = read
            case .failure(let refusal): return refusal.response
            }
            var horizon: Int64?
            if let text = object["horizon"] as? String {
                guard let seconds = WindowDuration.seconds(from: text) else {
                    return ExploreResponse.error(.badRequest, "horizon: expected a duration such as 30m, 6h or 2d (got '\(text)')")
                }
                horizon = seconds * 1_000_000
            }
            let paths: PathsAnalysis
            do {
                paths = try PathsAnalysis.checked(step: object["step"] as? Int ?? 0, horizon: horizon, funnel: query.funnel)
            } catch {
                return ExploreResponse.error(.badRequest, "step: \(error)")
            }
            var asked = query
            asked.analyses = [paths]
            let question = asked
            let days: [String: PathCounts]
            do {
                days = try await pool.withConnection { c in try explorer.answer(question, on: c) }.days(of: paths)
            } catch let error as ExploreError {
                return ExploreResponse.error(error.status, error.description)
            }
            return ExploreResponse.json(PathTreeText.json(paths.tree(PathCounts(adding: days.values)), about: PathTreeText.About(query.funnel, paths: paths)))
        }
        router.post("/api/person-events") { request, _ -> Response in
            guard let object = try await body(request) else {
                return ExploreResponse.error(.badRequest, "the body must be a JSON object with app, ids, from and to")
            }
            guard let app = object["app"] as? String, let ids = object["ids"] as? [String], !ids.isEmpty, ids.count <= 1_000 else {
                return ExploreResponse.error(.badRequest, "app and ids: expected the app's name and the person's ids (1 to 1,000)")
            }
            guard let from = (object["from"] as? String).flatMap(Timestamps.parse), let to = (object["to"] as? String).flatMap(Timestamps.parse) else {
                return ExploreResponse.error(.badRequest, "from and to: expected times such as 2026-11-28T12:00:00Z")
            }
            let events = try await pool.withConnection { c in
                // Read as the explorer's login, through analytics: a person of an app it is not granted has no events.
                try c.query(
                    """
                    SELECT "timestamp", type, coalesce(event, type), message_id FROM analytics.event_log
                    WHERE app = $1 AND (user_id = ANY ($2::text[]) OR (user_id IS NULL AND anonymous_id = ANY ($2::text[])))
                      AND "timestamp" BETWEEN $3 AND $4
                    ORDER BY "timestamp", coalesce(event, type), message_id LIMIT 500
                    """, [.text(app), .textArray(ids), .microseconds(from), .microseconds(to)]
                ).rows.map { row in
                    ["time": row.text(at: 0) ?? "", "type": row.text(at: 1) ?? "", "label": row.text(at: 2) ?? ""]
                }
            }
            return ExploreResponse.json(JSONText.object(["events": events]))
        }
    }

    /// The request's JSON object and the funnel it asks, checked as `POST /api/queries` checks it.
    private static func read(
        _ request: Request, configuration: ExploreConfiguration
    ) async throws -> Result<([String: Any], FunnelQuery), ResponseFailure> {
        guard request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true else {
            return .failure(ResponseFailure(ExploreResponse.error(.unsupportedMediaType, "Content-Type: expected application/json")))
        }
        guard let object = try await body(request) else {
            return .failure(ResponseFailure(ExploreResponse.error(.badRequest, "the body must be a JSON object with a 'definition'")))
        }
        let data = (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
        switch QueryRequest.parse(data, configuration: configuration) {
        case .success(let query): return .success((object, query))
        case .failure(let refused): return .failure(ResponseFailure(ExploreResponse.error(.badRequest, refused.message)))
        }
    }

    private static func body(_ request: Request) async throws -> [String: Any]? {
        guard let buffer = try? await request.body.collect(upTo: 256 * 1024) else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any]
    }

    /// A refusal, carried where a `Result` needs an error.
    struct ResponseFailure: Error {
        let response: Response

        init(_ response: Response) {
            self.response = response
        }
    }

    /// The whole list as CSV, written to the response as it is made.
    private static func csv(_ persons: [ListedPerson], about: PersonListText.About) -> Response {
        let name = "\(about.funnel)-\(about.cell.outcome.rawValue)-\(about.cell.step).csv".filter { $0.isLetter || $0.isNumber || "-_.".contains($0) }
        return Response(
            status: .ok,
            headers: [.contentType: "text/csv; charset=utf-8", .contentDisposition: "attachment; filename=\"\(name)\"", .cacheControl: "no-store"],
            body: ResponseBody { writer in
                var text = PersonListText(format: .csv, about: about)
                var chunk = text.start()
                for person in persons {
                    chunk += text.add(person)
                    if chunk.utf8.count >= 64 * 1024 {
                        try await writer.write(ByteBuffer(string: chunk))
                        chunk = ""
                    }
                }
                try await writer.write(ByteBuffer(string: chunk))
                try await writer.finish(nil)
            })
    }

    /// The terminal command that lists the same persons, the funnel saved as `funnel.yaml` (the page's "Copy YAML").
    static func command(_ query: FunnelQuery, cell: PersonCell) -> String {
        var words = ["onramp funnel --definition funnel.yaml --persons \(cell.outcome.rawValue):\(cell.step)"]
        if let value = cell.breakdown { words.append("--breakdown-value '\(value.path)=\(value.value)'") }
        if let from = query.from { words.append("--from \(from)") }
        if let to = query.to { words.append("--to \(to)") }
        for name in query.audiences.within { words.append("--audience '\(name)'") }
        for name in query.audiences.outside { words.append("--not-audience '\(name)'") }
        words.append("--format csv")
        return words.joined(separator: " ")
    }
}

extension ExploreError {
    /// The HTTP status an explorer route answers this error with.
    var status: HTTPResponse.Status {
        switch self {
        case .unknownApp: .notFound
        case .unknownTimeZone, .unknownAudience, .audienceUnit: .badRequest
        case .timedOut, .cancelled: .gatewayTimeout
        }
    }
}
