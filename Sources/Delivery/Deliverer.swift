public import Foundation
public import Funnels
public import LibPQ
import LogReading
import Notifications

/// Sends the ledger's due changes to each audience's receiver
/// (docs/audiences.md, "Delivering"): in batches, oldest first, as a signed
/// JSON object whose `changes` each carry their delivery id and the traits
/// the audience names. A batch the receiver takes is marked delivered at
/// once, in its own statement; one it does not is tried again after an
/// exponential backoff with jitter (or the receiver's `Retry-After`), and
/// dead-lettered once the audience's `max_attempts` are spent. At least once:
/// a crash between the receiver's answer and the mark sends that batch
/// again, with the same delivery ids.
public struct Deliverer: Sendable {
    public struct Summary: Sendable, Equatable {
        public var delivered = 0
        public var failed = 0
        public var dead = 0
        /// The last failure, for the run's line.
        public var lastError: String?

        public init() {}
    }

    /// A delivery that cannot start: a secret missing or unreadable.
    public struct SetupError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// The environment variable holding the signing secret, unless an audience names a `secret_file`.
    public static let secretVariable = "ONRAMP_DELIVERY_SECRET"

    public let audiences: [Audience]
    /// By audience, the secret its batches are signed with.
    let secrets: [String: Data]
    /// Changes per POST.
    public var batchSize = 500
    /// Before the second try; doubled before each further one, up to `longestDelay`.
    public var firstDelay: Duration = .seconds(30)
    public var longestDelay: Duration = .seconds(3600)
    public var timeout: Duration = .seconds(10)

    /// The delivering audiences of `configuration` with their secrets; throws
    /// `SetupError` naming the audience when one is missing, before anything is sent or written.
    public init(configuration: FunnelConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        audiences = configuration.audiences.filter { $0.delivery != nil }
        var secrets: [String: Data] = [:]
        for audience in audiences {
            guard let delivery = audience.delivery else { continue }
            let secret: String
            if let file = delivery.secretFile {
                do {
                    secret = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
                } catch {
                    throw SetupError(description: "audience '\(audience.name)': deliver.secret_file \(file): \(error.localizedDescription)")
                }
            } else {
                secret = environment[Self.secretVariable] ?? ""
            }
            guard !secret.isEmpty else {
                throw SetupError(description: """
                    audience '\(audience.name)': deliver: no signing secret (set $\(Self.secretVariable), or deliver.secret_file)
                    """)
            }
            secrets[audience.name] = Data(secret.utf8)
        }
        self.secrets = secrets
    }

    /// Sends what is due at `now`, audience by audience, until each has
    /// nothing due or its receiver fails a batch. Database work runs on `pool`'s threads.
    public func run(_ pool: ConnectionPool, now: @Sendable () -> Date = { Date() }) async throws -> Summary {
        var summary = Summary()
        for audience in audiences {
            guard let delivery = audience.delivery, let secret = secrets[audience.name] else { continue }
            while true {
                let clock = Timestamps.microseconds(now())
                let (batch, traits) = try await pool.withConnection { c in
                    let batch = try DeliveryLedger.due(c, audience: audience.name, now: clock, limit: batchSize)
                    return (batch, try Self.traits(c, of: batch, paths: delivery.traits))
                }
                guard !batch.isEmpty else { break }
                let body = Self.body(audience: audience, batch: batch, traits: traits)
                let outcome = await SignedPost.post(body, to: delivery.url, secret: secret, timeout: timeout)
                let ids = batch.map(\.id)
                switch outcome {
                case .delivered:
                    let at = Timestamps.microseconds(now())
                    try await pool.withConnection { c in try DeliveryLedger.delivered(c, ids: ids, now: at) }
                    summary.delivered += batch.count
                case .failed(let reason, let retryAfter):
                    let attempts = batch.map(\.attempts).max() ?? 0
                    let next = Timestamps.microseconds(now()) + backoff(after: attempts + 1, retryAfter: retryAfter)
                    let dead = try await pool.withConnection { c in
                        try DeliveryLedger.failed(c, ids: ids, reason: reason, next: next, maxAttempts: delivery.maxAttempts)
                    }
                    summary.failed += batch.count
                    summary.dead += dead
                    summary.lastError = "\(audience.name): \(reason)"
                }
                if case .failed = outcome { break }
            }
        }
        return summary
    }

    /// Microseconds to wait after the `attempts`-th failed try: doubling from
    /// `firstDelay`, at most `longestDelay`, half of it random (so receivers
    /// coming back are not hit by every sender at once), and never sooner
    /// than the receiver's `Retry-After`.
    func backoff(after attempts: Int, retryAfter: Duration?) -> Int64 {
        let first = firstDelay.microseconds, longest = longestDelay.microseconds
        let doubled = first << Int64(min(max(0, attempts - 1), 20))
        let ceiling = min(longest, doubled)
        let delay = ceiling / 2 + Int64.random(in: 0...max(0, ceiling / 2))
        return max(delay, retryAfter.map(\.microseconds) ?? 0)
    }

    /// The latest traits `paths` names of each unit of `batch`, by unit id.
    static func traits(_ c: Connection, of batch: [DeliveryLedger.Entry], paths: [String]) throws -> [String: [String: String]] {
        guard !paths.isEmpty, let app = batch.first?.app else { return [:] }
        var found: [String: [String: String]] = [:]
        for isGroup in [false, true] {
            let units = Array(Set(batch.filter { $0.isGroup == isGroup }.map(\.unit))).sorted()
            guard !units.isEmpty else { continue }
            var ids: [String: [String]] = [:]
            if !isGroup {
                for row in try c.query(
                    "SELECT person_id, id FROM analytics.person_ids WHERE app = $1 AND person_id = ANY($2::text[])", [.text(app), .textArray(units)]
                ).rows {
                    ids[try row.decode(String.self, at: 0), default: []].append(try row.decode(String.self, at: 1))
                }
            }
            let persons = units.map { unit in
                ListedPerson(id: unit, ids: [unit] + (ids[unit] ?? []), cohortDay: "", chainStart: nil, lastStep: 0, lastStepName: "",
                             lastStepTime: nil, breakdown: [])
            }
            found.merge(try PersonTraits.read(c, app: app, persons: persons, paths: paths, groups: isGroup)) { first, _ in first }
        }
        return found
    }

    /// The batch as sent: `{"audience", "app", "changes": [{delivery_id, audience, change, person_id | group_id, at, traits}]}`.
    static func body(audience: Audience, batch: [DeliveryLedger.Entry], traits: [String: [String: String]]) -> String {
        let changes: [[String: Any]] = batch.map { entry in
            var change: [String: Any] = [
                "delivery_id": String(entry.id), "audience": audience.name, "change": entry.change, "at": instant(entry.at),
                entry.isGroup ? "group_id" : "person_id": entry.unit,
            ]
            if let paths = audience.delivery?.traits, !paths.isEmpty {
                change["traits"] = traits[entry.unit] ?? [:]
            }
            return change
        }
        let object: [String: Any] = ["audience": audience.name, "app": audience.app, "changes": changes]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// `2026-11-21T10:00:01.234Z`: a format style, not a formatter made per change.
    static func instant(_ microseconds: Int64) -> String {
        Date(timeIntervalSince1970: Double(microseconds) / 1_000_000).formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}

extension Duration {
    var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }
}
