import ArgumentParser
import Benchmarks
import Foundation
import Simulation

/// `onramp-bench explore`: query-time funnels from fresh `onramp funnel` processes, against plain SQL and chDB.
struct BenchExplore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explore", abstract: "Time query-time funnels (onramp funnel) against plain SQL and chDB's windowFunnel.")

    @Option(help: "Events of history to write (over 30 days).")
    var events: Int = 1_000_000

    @Option(help: "How much devices use the app after onboarding (as for `report`).")
    var laterUse: Double = 1

    @Option(help: "Fresh processes per query after its first; the best is reported.")
    var repeats: Int = 3

    @Option(help: "The onramp binary to time (default: the one beside this one).")
    var onramp: String?

    @Option(help: "A Python with the chdb package (pip install chdb); without it the chDB columns are left out.")
    var python: String = "python3"

    @OptionGroup var options: BenchOptions

    func validate() throws {
        guard events > 0 else { throw ValidationError("--events must be at least 1 (got \(events))") }
        guard (0...10).contains(laterUse) else { throw ValidationError("--later-use must be from 0 to 10 (got \(laterUse))") }
        guard (1...20).contains(repeats) else { throw ValidationError("--repeats must be between 1 and 20 (got \(repeats))") }
    }

    func run() async throws {
        let executable = onramp ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("onramp").path
        let bench = ExploreBenchmark(
            events: events, laterUse: LaterUse(scale: laterUse), repeats: repeats, executable: executable, python: python,
            serverURL: options.serverURL, migrations: try options.migrationsDirectory(), log: { info($0) })
        let r = try await bench.run()
        if try options.printedJSON(r) { return }
        let chdbFirst = r.chdbFirstSeconds.map(fmt) ?? "–", chdbBest = r.chdbBestSeconds.map(fmt) ?? "–"
        var lines = [
            "events                 \(r.events) (yoked \(r.appEvents)); log \(r.logBytes / 1_048_576) MB, store \(r.storeBytes / 1_048_576) MB",
            "store built (1st query) \(fmt(r.storeBuildSeconds)) s",
            "plain SQL, q1's steps   \(fmt(r.sqlSeconds)) s   reached \(r.sqlStepPersons)",
            "chDB windowFunnel q1    first \(chdbFirst) s, best \(chdbBest) s   reached \(r.chdbStepPersons.map { "\($0)" } ?? "–")"
                + (r.chdbNote.map { " (\($0))" } ?? ""),
        ]
        for q in r.queries {
            var line = "\(q.name)  first \(fmt(q.firstSeconds)) s, repeated \(fmt(q.repeatedSeconds)) s (\(q.repeatedSamples.map(fmt).joined(separator: ", "))), "
            line += "recounted \(fmt(q.recountSeconds)) s (\(q.recountSamples.map(fmt).joined(separator: ", ")))   started \(q.started), completed \(q.completed)"
            if let first = r.chdbFirstSeconds, let best = r.chdbBestSeconds {
                line += String(
                    format: "   first ÷ chDB first %.2f, repeated ÷ chDB best %.2f, recounted ÷ chDB best %.2f",
                    q.firstSeconds / first, q.repeatedSeconds / best, q.recountSeconds / best)
            }
            line += String(format: "   first ÷ SQL %.3f", q.firstSeconds / r.sqlSeconds)
            lines.append(line)
        }
        if let p = r.persons {
            lines.append(String(
                format: "persons dropped:%d (%d): list %.2f s ÷ q1 recounted %.2f s = %.2f; paths %.2f s ÷ q1 --diagnostics recounted %.2f s = %.2f; SQL %.3f s (%d persons)",
                p.step, p.dropped, p.listSeconds, p.recountSeconds, p.listSeconds / p.recountSeconds, p.pathsSeconds,
                p.diagnosticsRecountSeconds, p.pathsSeconds / p.diagnosticsRecountSeconds, p.sqlSeconds, p.sqlPersons))
            lines.append(String(
                format: "peak RSS, %d persons ÷ %d: query time %d ÷ %d KB = %.2f; from the night %d ÷ %d KB = %.2f",
                p.largeList, p.smallList, p.largeRSS, p.smallRSS, Double(p.largeRSS) / Double(max(1, p.smallRSS)), p.storedLargeRSS,
                p.storedSmallRSS, Double(p.storedLargeRSS) / Double(max(1, p.storedSmallRSS))))
        }
        if let a = r.aggregates {
            lines.append("SQL q1, window_funnel (\(a.implementation)) " + String(
                format: "%.2f s ÷ count(*) floor %.2f s = %.2f; PL/pgSQL fallback %.2f s (÷ native %.1f); funnel_report %.2f s, fallback %.2f s (÷ native %.1f)",
                a.windowFunnelSeconds, a.floorSeconds, a.windowFunnelSeconds / a.floorSeconds, a.fallbackSeconds,
                a.fallbackSeconds / a.windowFunnelSeconds, a.funnelReportSeconds, a.funnelReportFallbackSeconds,
                a.funnelReportFallbackSeconds / a.funnelReportSeconds))
            lines.append("SQL q1 reached: window_funnel \(a.reached), fallback \(a.fallbackReached), funnel_report \(a.funnelReportReached), its fallback \(a.funnelReportFallbackReached)")
        }
        print(lines.joined(separator: "\n"))
    }

    private func fmt(_ x: Double) -> String { String(format: "%.2f", x) }
}
