public import Foundation
import Funnels
import LogReading
public import LibPQ
import NIOConcurrencyHelpers

/// Answers a funnel at query time from every event stored up to the query,
/// with the nightly job's engine: the same identity merge, evaluator,
/// tallies and report, so a funnel asked here and the same funnel
/// configured give the same numbers at the same clock (docs/explore.md).
/// It reads the app's `ColumnStore`, brought up to date first, and writes
/// nothing to the database.
public struct Explorer: Sendable {
    public var cacheRoot: URL
    /// Seconds a query may take, reading included (nil: no limit).
    public var timeoutSeconds: Double?
    /// Whether an answer counted before, and exact still (`AnswerCache`), is reused.
    public var reuseAnswers: Bool

    public init(cacheRoot: URL = Explorer.defaultCacheRoot, timeoutSeconds: Double? = nil, reuseAnswers: Bool = true) {
        self.cacheRoot = cacheRoot
        self.timeoutSeconds = timeoutSeconds
        self.reuseAnswers = reuseAnswers
    }

    /// Paths of Segment's context an analyst breaks down by most, kept in
    /// every store so a first breakdown by one of them reads no history.
    public static let standardPaths: Set<String> = [
        "context.os.name", "context.os.version", "context.app.version", "context.app.build", "context.device.type",
        "context.device.model", "context.locale", "context.library.name", "context.campaign.source", "context.campaign.name",
    ]

    /// `$ONRAMP_EXPLORE_CACHE`, else `$XDG_CACHE_HOME/onramp/explore`, else `~/.cache/onramp/explore`.
    public static var defaultCacheRoot: URL {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["ONRAMP_EXPLORE_CACHE"], !path.isEmpty { return URL(fileURLWithPath: path) }
        let base = environment["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache")
        return base.appendingPathComponent("onramp").appendingPathComponent("explore")
    }

    /// The answer to `query`, read on `c` (in a transaction of its own).
    /// `keeping`: attribute paths the store should hold beside the query's
    /// when it reads the log whole (the configured funnels'), so the next
    /// query on one of them does not read it again.
    /// `control`: where the query says how far it got, and can be cancelled.
    public func answer(
        _ query: FunnelQuery, on c: Connection, keeping: Set<String> = [], control: QueryControl? = nil
    ) throws -> FunnelAnswer {
        guard TimeZone(identifier: query.timeZone) != nil else { throw ExploreError.unknownTimeZone(query.timeZone) }
        let deadline = Deadline(seconds: timeoutSeconds, control: control)
        try control?.attach(c)
        defer { control?.detach() }
        do {
            return try answer(query, on: c, keeping: keeping, deadline: deadline)
        } catch let error as PostgresError where error.sqlState == "57014" {
            // A cancel from the control, else the statement timeout set below.
            throw control?.isCancelled == true ? ExploreError.cancelled : ExploreError.timedOut(timeoutSeconds ?? 0)
        }
    }

    private func answer(
        _ query: FunnelQuery, on c: Connection, keeping: Set<String>, deadline: Deadline
    ) throws -> FunnelAnswer {
        try deadline.check()
        let store = try self.store(of: query.funnel.app, on: c)
        let cache = AnswerCache(directory: store.directory.appendingPathComponent("answers"))
        // The store's lock before the snapshot: one query's refresh never
        // saves a checkpoint older than one saved by a query that started later.
        return try store.locked(until: deadline) {
            var evaluateSeconds = 0.0
            var logFrom: String?
            func count() throws -> ((QueryEvaluation.Counted, Bool), ColumnStore.Refresh) {
                try c.transaction(isolation: .repeatableRead) { c in
                    // The log's statements are planned for millions of rows; compiling them (JIT) took longer than running them.
                    try c.query("SELECT set_config('jit', 'off', true)")
                    if let timeoutSeconds {
                        try c.query("SELECT set_config('statement_timeout', $1, true)", [.text("\(Int((min(timeoutSeconds, 86_400) * 1000).rounded(.up)))ms")])
                    }
                    var query = query
                    try query.audiences.load(c, funnel: query.funnel)
                    logFrom = try ArchivedMonths.logFrom(c, app: query.funnel.app)
                    deadline.control?.enter(.reading)
                    return try store.withColumns(c, paths: query.paths, keeping: keeping.union(Self.standardPaths), deadline: deadline) { stored in
                        deadline.control?.enter(.counting)
                        if reuseAnswers, let counted = cache.lookup(query, events: stored.events) { return (counted, true) }
                        let started = Date()
                        defer { evaluateSeconds = Date().timeIntervalSince(started) }
                        let snapshot = try stored.snapshot(paths: query.paths)
                        let counted = try QueryEvaluation(query: query, snapshot: snapshot, deadline: deadline).run()
                        cache.store(counted, query: query, events: stored.events)
                        return (counted, false)
                    }
                }
            }
            let ((counted, cached), refresh): ((QueryEvaluation.Counted, Bool), ColumnStore.Refresh)
            do {
                ((counted, cached), refresh) = try count()
            } catch is ColumnStoreError {
                // Files that do not match their manifest: the store is read from the log again, in a transaction of its own.
                try store.clear()
                ((counted, cached), refresh) = try count()
            }
            let (report, seconds) = counted.report(query)
            var answer = FunnelAnswer(
                report: report, secondsToComplete: seconds,
                histogram: TimeHistogram.bins(seconds, windowSeconds: query.funnel.windowSeconds),
                events: refresh.events, newEvents: refresh.newEvents, storeRebuilt: refresh.rebuilt, reusedAnswer: cached,
                refreshSeconds: refresh.seconds, evaluateSeconds: evaluateSeconds)
            answer.analysisDays = Dictionary(zip(query.analyses.map(\.id), counted.analyses)) { first, _ in first }
            answer.logFrom = logFrom
            return answer
        }
    }
}

extension Explorer {
    /// The app's event names (track events, and screens as `screen:NAME`)
    /// with how many events carry each, most first, and the attribute paths
    /// its store keeps: what the explorer's pickers offer. Read from the
    /// app's store, brought up to date first.
    public func catalog(app: String, on c: Connection, keeping: Set<String> = []) throws -> EventCatalog {
        let store = try self.store(of: app, on: c)
        let deadline = Deadline(seconds: timeoutSeconds)
        return try store.locked(until: deadline) {
            try c.transaction(isolation: .repeatableRead) { c in
                try c.query("SELECT set_config('jit', 'off', true)")
                return try store.withColumns(c, paths: [], keeping: keeping.union(Self.standardPaths), deadline: deadline) { stored in
                    let columns = try stored.snapshot(paths: []).columns
                    var counts: [UInt64: Int] = [:]
                    for index in 0..<columns.count {
                        counts[UInt64(columns.name[index]) << 8 | UInt64(columns.kind[index]), default: 0] += 1
                    }
                    let entries = counts.compactMap { key, events -> EventCatalog.Entry? in
                        let kind = EventColumns.kinds[Int(key & 0xFF)]
                        guard kind == .track || kind == .screen, let name = stored.names.string(UInt32(key >> 8)) else { return nil }
                        return EventCatalog.Entry(label: kind == .screen ? "screen:\(name)" : name, events: events)
                    }
                    return EventCatalog(
                        app: app, entries: entries.sorted { ($0.events, $1.label) > ($1.events, $0.label) },
                        paths: stored.manifest.paths.sorted(), events: stored.events)
                }.0
            }
        }
    }
}

extension Explorer {
    /// `app`'s store for the database `c` is on and its login; `unknownApp`
    /// when the log holds no event of it that the login may read. Asked
    /// before every query, so a revoked grant holds from the next one: a
    /// store the login kept of an app it may no longer read is deleted, and
    /// an app not granted reads as one that does not exist (docs/access.md).
    fileprivate func store(of app: String, on c: Connection) throws -> ColumnStore {
        let store = ColumnStore(root: cacheRoot, database: try ColumnStore.databaseIdentity(c), app: app)
        guard try c.query("SELECT EXISTS (SELECT 1 FROM analytics.event_log WHERE app = $1)", [.text(app)]).scalar(Bool.self) else {
            try? FileManager.default.removeItem(at: store.directory)
            throw ExploreError.unknownApp(app)
        }
        return store
    }
}

/// What an app's events are called, for pickers.
public struct EventCatalog: Sendable {
    public struct Entry: Sendable, Equatable {
        /// A step as the explorer writes it: the event's name, or `screen:NAME`.
        public var label: String
        public var events: Int
    }

    public var app: String
    public var entries: [Entry]
    /// Attribute paths kept for the app (where, hold and breakdown suggestions).
    public var paths: [String]
    public var events: Int
}

/// Why a query could not be answered, worded for the analyst.
public enum ExploreError: Error, CustomStringConvertible, Equatable {
    case unknownApp(String)
    case unknownAudience(String, app: String)
    case audienceUnit(String, holds: String, counts: String)
    case unknownTimeZone(String)
    case timedOut(Double)
    case cancelled

    public var description: String {
        switch self {
        case .unknownApp(let app): "app: unknown app '\(app)' (the log holds no event of it that this login may read)"
        case .unknownAudience(let name, let app):
            "audience: unknown audience '\(name)' of app '\(app)' (onramp audiences list names them; the nightly job keeps those configured)"
        case .audienceUnit(let name, let holds, let counts):
            "audience: '\(name)' holds \(holds)s, the funnel counts \(counts)s"
        case .unknownTimeZone(let zone): "time zone: '\(zone)' is not an IANA time zone (e.g. Europe/Berlin)"
        case .timedOut(let seconds): "the query ran longer than its timeout of \(seconds) s (raise --timeout, or narrow it)"
        case .cancelled: "the query was cancelled"
        }
    }
}
