import Foundation
import Funnels
import Hummingbird
import LibPQ
import LocalPostgres
import NIOConcurrencyHelpers
import Simulation
import TestSupport
import Testing

/// `onramp report --fail-on-regression --notify URL` as a scheduler runs it,
/// against a real webhook receiver on loopback: delivered, retried after a
/// 503, undeliverable (exit 5, the report written all the same), and the exit
/// statuses when a regression and a missed target are found together.
@Suite struct ReportAlertCommandTests {
    @Test("regression alerts: exit 4, one message delivered; a 503 is retried; 3 wins over 4; undeliverable is exit 5 with the report written")
    func notifyAndExitStatuses() async throws {
        let db = try await TestDatabase.create()
        let now = Date()
        let events = SimulatedHistory.events(
            count: 40_000, from: 40, seed: 12, apps: ["yoked"],
            plants: [PlantedRegression(app: "yoked", version: "2.4.0", step: "profile_created", points: 10)], now: now)
        let pool = db.pool(maxConnections: 1)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        await pool.close()

        try await WebhookReceiver.with { hook in
            let base = ["report", "--database-url", db.url, "--quiet", "--funnel", "yoked_onboarding"]
            // Delivered at once; the regression fails the run.
            hook.answers = []
            let first = try await OnrampBinary.runOffPool(base + ["--fail-on-regression", "--notify", hook.url, "--format", "json"])
            print("alert: exit \(first.status); stderr:\n\(first.stderr)")
            #expect(first.status == 4, "\(first.stderr)")
            // Logged without the webhook's path, which is its secret.
            #expect(first.stderr.contains("notified \(hook.url.replacingOccurrences(of: "/hook", with: "/…")) ("))
            #expect(!first.stderr.contains(hook.url))
            // Once, unless the receiver (in this process, beside the whole
            // suite) answered too late and the retry delivered it again: at
            // least once, and the same message each time.
            let received = hook.received
            #expect(received.count == 1 || first.stderr.contains("deadlineExceeded") && Set(received).count == 1, "\(first.stderr)")
            let message = try #require(received.first.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
            print("alert: received \(received.first ?? "")")
            let text = try #require(message["text"] as? String)
            #expect(text.contains("regression") && text.contains("conversion to profile_created") && text.contains("version 2.3.0 → 2.4.0"))
            let regressions = try #require(message["regressions"] as? [[String: Any]])
            #expect(regressions.first?["step"] as? String == "profile_created" && regressions.first?["kind"] as? String == "version")
            #expect((message["missed_targets"] as? [[String: Any]])?.isEmpty == false)
            // The JSON report lists the same regression first.
            let report = try #require(try JSONSerialization.jsonObject(with: Data(first.stdout.utf8)) as? [String: Any])
            #expect((report["regressions"] as? [[String: Any]])?.first?["step"] as? String == "profile_created")

            // A 503, then delivered on the second try; the missed targets' 3 wins over the regression's 4.
            hook.reset(answers: [503])
            let second = try await OnrampBinary.runOffPool(
                base + ["--fail-on-regression", "--fail-on-missed-targets", "--notify", hook.url])
            #expect(second.status == 3, "\(second.stderr)")
            #expect(hook.received.count == 2 || second.stderr.contains("deadlineExceeded") && hook.received.count > 2)
            #expect(second.stderr.contains("after 2 tries") || second.stderr.contains("deadlineExceeded"), "\(second.stderr)")
            #expect(second.stdout.hasPrefix("Regressions (1)\n  yoked_onboarding: conversion to profile_created"))

            // Never accepted: the report is written, the exit status says the team was not told.
            hook.reset(answers: [503, 503, 503])
            let out = FileManager.default.temporaryDirectory.appendingPathComponent("onramp-alert-\(UUID().uuidString)")
            let third = try await OnrampBinary.runOffPool(
                base + ["--fail-on-regression", "--notify", hook.url, "--notify-attempts", "3", "--out", out.path])
            #expect(third.status == 5, "\(third.stderr)")
            #expect(hook.received.count == 3)
            #expect(third.stderr.contains("could not deliver") && !third.stderr.contains(hook.url))
            #expect(FileManager.default.fileExists(atPath: out.appendingPathComponent("report.json").path))
            let index = try String(contentsOf: out.appendingPathComponent("index.html"), encoding: .utf8)
            #expect(index.contains("data-regressions=\"1\""))
            try? FileManager.default.removeItem(at: out)
        }
        try await db.drop()
    }

    @Test("a broken release: --fail-on-instrumentation exits 6, the drop it explains alone does not fail --fail-on-regression, the message and every format name it, and onramp events shows the event gone from the version")
    func brokenRelease() async throws {
        let db = try await TestDatabase.create()
        let events = SimulatedHistory.events(
            count: 40_000, from: 40, seed: 13, apps: ["yoked"], plants: [try PlantedRegression.parseBreak("yoked:2.4.0:otp_verified").get()])
        let pool = db.pool(maxConnections: 1)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        await pool.close()
        try await WebhookReceiver.with { hook in
            let base = ["report", "--database-url", db.url, "--quiet", "--funnel", "yoked_onboarding"]
            let out = FileManager.default.temporaryDirectory.appendingPathComponent("onramp-broken-\(UUID().uuidString)")
            let first = try await OnrampBinary.runOffPool(
                base + ["--fail-on-instrumentation", "--fail-on-regression", "--notify", hook.url, "--format", "json", "--out", out.path])
            #expect(first.status == 6, "\(first.stderr)")
            #expect(first.stderr.contains("instrumentation:\n  yoked_onboarding: step otp_verified: 2.4.0 never sent event: otp_verified"), "\(first.stderr)")
            let report = try #require(try JSONSerialization.jsonObject(with: Data(first.stdout.utf8)) as? [String: Any])
            let findings = try #require(report["instrumentation"] as? [[String: Any]])
            #expect(findings.first?["kind"] as? String == "event_vanished" && findings.first?["recent"] as? String == "2.4.0")
            let regressions = try #require(report["regressions"] as? [[String: Any]])
            #expect(!regressions.isEmpty && regressions.allSatisfy { $0["likely_instrumentation"] is String }, "\(regressions)")
            let message = try #require(hook.received.first.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
            let text = try #require(message["text"] as? String)
            #expect(text.contains("1 instrumentation finding") && text.contains("instrumentation: yoked_onboarding: step otp_verified"), "\(text)")
            #expect(text.contains("(likely instrumentation)"))
            let csv = try String(contentsOf: out.appendingPathComponent("report.csv"), encoding: .utf8)
            #expect(csv.contains("\nfunnel,instrumentation,step,") && csv.contains("yoked_onboarding,event_vanished,otp_verified,"))
            let markdown = try String(contentsOf: out.appendingPathComponent("report.md"), encoding: .utf8)
            #expect(markdown.contains("## Instrumentation (1)"))
            let index = try String(contentsOf: out.appendingPathComponent("index.html"), encoding: .utf8)
            #expect(index.contains("data-instrumentation=\"1\"") && index.contains("data-instrumentation-kind=\"event_vanished\""))
            try? FileManager.default.removeItem(at: out)

            // Without the instrumentation flag: the only regressions are the tracking's, so the run passes.
            let second = try await OnrampBinary.runOffPool(base + ["--fail-on-regression"])
            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stdout.contains("Instrumentation (1): likely broken tracking, not users leaving\n  yoked_onboarding: step otp_verified"))

            // The catalogue shows the version that stopped sending it.
            let listing = try await OnrampBinary.runOffPool(["events", "--app", "yoked", "--database-url", db.url])
            #expect(listing.status == 0, "\(listing.stderr)")
            let line = try #require(listing.stdout.split(separator: "\n").first { $0.hasPrefix("event: otp_verified ") })
            #expect(line.contains("2.3.0") && !line.contains("2.4.0"), "\(line)")
            #expect(listing.stdout.split(separator: "\n").contains { $0.hasPrefix("event: onboarding_started ") && $0.contains("2.4.0") })
            let json = try await OnrampBinary.runOffPool(["events", "--app", "yoked", "--format", "json", "--database-url", db.url])
            let listed = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
            let labels = try #require(listed["labels"] as? [[String: Any]])
            let otp = try #require(labels.first { $0["label"] as? String == "event: otp_verified" })
            let sql = try await db.pool(maxConnections: 1).query(
                "SELECT count(*) FROM analytics.events WHERE app = 'yoked' AND event = 'otp_verified'").scalar(Int.self)
            #expect(otp["events"] as? Int == sql)
        }
        try await db.drop()
    }
}

extension OnrampBinary {
    /// `run`, on a thread of its own: the binary blocks for its whole run,
    /// and the receiver it talks to needs the cooperative pool meanwhile.
    static func runOffPool(_ arguments: [String]) async throws -> Output {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try run(arguments) }) }
        }
    }
}

/// A webhook on loopback that records every body and answers from a script
/// (`answers`: statuses for the next requests, then 200).
final class WebhookReceiver: Sendable {
    private let state = NIOLockedValueBox((received: [String](), answers: [Int]()))
    let url: String

    private init(port: Int) {
        url = "http://127.0.0.1:\(port)/hook"
    }

    var received: [String] { state.withLockedValue { $0.received } }

    var answers: [Int] {
        get { state.withLockedValue { $0.answers } }
        set { state.withLockedValue { $0.answers = newValue } }
    }

    func reset(answers: [Int]) {
        state.withLockedValue { $0 = ([], answers) }
    }

    /// The status for a request with `body`.
    private func answer(_ body: String) -> Int {
        state.withLockedValue { state in
            state.received.append(body)
            return state.answers.isEmpty ? 200 : state.answers.removeFirst()
        }
    }

    static func with(_ body: @Sendable (WebhookReceiver) async throws -> Void) async throws {
        let receiver = NIOLockedValueBox<WebhookReceiver?>(nil)
        let router = Router()
        router.post("hook") { request, _ -> Response in
            let bytes = try await request.body.collect(upTo: 1 << 20)
            let status = receiver.withLockedValue { $0 }?.answer(String(buffer: bytes)) ?? 500
            return Response(status: .init(code: status))
        }
        try await withLoopbackServer(router) { port in
            let hook = WebhookReceiver(port: port)
            receiver.withLockedValue { $0 = hook }
            try await body(hook)
        }
    }
}
