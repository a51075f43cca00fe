import ArgumentParser
import Explore
import Foundation
import Funnels
import LibPQ
import Reports

/// `onramp funnel`: any funnel at query time, from every event stored up to now.
struct FunnelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "funnel",
        abstract: "Answer one funnel now, from the whole log, without configuring it or waiting for the night (docs/explore.md).",
        discussion: """
            Either --definition FILE (one entry of the configuration's `funnels:`, with its app) or \
            --app with two or more --step. A step is an event name, or screen:NAME, optionally followed by \
            `where PATH=VALUE[,PATH=VALUE]`, `within DURATION` and `optional`, e.g. \
            --step 'otp_verified within 2m' --step 'screen:welcome where properties.flow=employee'.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var configuration: ConfigurationOptions

    @Option(help: "A YAML file holding one funnel, written as an entry of the configuration's `funnels:`.")
    var definition: String?

    @Option(help: "The app (with --step).")
    var app: String?

    @Option(name: .customLong("step"), help: "A step, in order (repeatable): EVENT or screen:NAME [where PATH=VALUE,…] [within 2m] [optional].")
    var steps: [String] = []

    @Option(help: "Conversion window, e.g. 1h, 30m, 7d (default 24h).")
    var window: String?

    @Option(name: .customLong("breakdown"), help: "A breakdown path (repeatable; default context.os.name and context.app.version).")
    var breakdowns: [String] = []

    @Option(name: .customLong("audience"), help: "Count only the persons in this audience, as the last run kept it (repeatable; docs/audiences.md).")
    var audiences: [String] = []

    @Option(name: .customLong("not-audience"), help: "Count only the persons not in this audience (repeatable).")
    var notAudiences: [String] = []

    @Option(help: "Step order: ordered (default), strict or any.")
    var order: String?

    @Option(name: .customLong("aggregate-by"), help: "Count persons (default) or group: the groups their group calls name.")
    var aggregateBy: String?

    @Option(help: "A name for the funnel in the output.")
    var name: String = "explore"

    @OptionGroup var range: RangeOptions

    @OptionGroup var list: PersonsOptions

    @Option(name: .customLong("as-of"), help: "The clock windows are judged at, e.g. '2026-11-28 12:00:00+00' (default: now).")
    var asOf: String?

    @Flag(help: "Also say why persons drop off (reads every event of the app's persons).")
    var diagnostics = false

    @Flag(help: "Also report retention after the funnel.")
    var retention = false

    @Option(help: "Give up after this many seconds, reading included.")
    var timeout: Double = 120

    @Option(help: "Where the app's event columns are kept (default: $ONRAMP_EXPLORE_CACHE, else ~/.cache/onramp/explore).")
    var cache: String?

    @Flag(help: "Count again even when an earlier query's answer is still exact (the same events, no window closed since).")
    var recount = false

    @Flag(help: "No timing line on stderr.")
    var quiet = false

    static let formats = ["table", "markdown", "csv", "json", "html"]

    func validate() throws {
        if list.asked { try list.checkFormat(range.format) } else { try range.check(formats: Self.formats) }
        if let asOf, Timestamps.parse(asOf) == nil {
            throw ValidationError("--as-of must be a time such as '2026-11-28 12:00:00+00' (got '\(asOf)')")
        }
        guard timeout > 0, timeout <= 86_400 else {
            throw ValidationError("--timeout must be a number of seconds above 0, at most a day (got \(timeout))")
        }
        if definition != nil, app != nil || !steps.isEmpty || window != nil || !breakdowns.isEmpty || order != nil {
            throw ValidationError("--definition holds the whole funnel: leave out --app, --step, --window, --breakdown and --order")
        }
        if definition == nil, app == nil { throw ValidationError("give --definition FILE, or --app with two or more --step") }
        if let both = audiences.first(where: notAudiences.contains) {
            throw ValidationError("--audience and --not-audience both name '\(both)': no one is counted")
        }
    }

    func run() throws {
        let funnel = try loadFunnel()
        guard funnel.steps.count >= 2 else {
            throw ValidationError("steps: a funnel needs at least two steps (got \(funnel.steps.count))")
        }
        let configured = try configuration.load()
        let (from, to) = (range.from, range.to)
        let zone = range.timeZone ?? configured.app(named: funnel.app)?.timeZone ?? configured.reportTimeZone ?? "UTC"
        let now = asOf.flatMap(Timestamps.parse) ?? Timestamps.microseconds(Date())
        let cell = try list.cell(in: funnel)
        var query = FunnelQuery(funnel: funnel, timeZone: zone, now: now, from: from, to: to)
        query.diagnostics = diagnostics
        query.retention = retention
        query.audiences = AudienceFilter(within: audiences, outside: notAudiences)
        let listing = cell.map { PersonListAnalysis(cell: $0, funnel: funnel) }
        if let listing { query.analyses.append(listing) }
        let paths = try list.paths(in: funnel)
        if let paths { query.analyses.append(paths) }
        let explorer = Explorer(
            cacheRoot: cache.map { URL(fileURLWithPath: $0) } ?? Explorer.defaultCacheRoot, timeoutSeconds: timeout, reuseAnswers: !recount)
        let connection = try Connection.connect(try database.resolvedURL())
        let answer = try explorer.answer(query, on: connection, keeping: configured.referencedPaths)
        if !quiet {
            Console.info(
                "\(funnel.name): \(answer.events) events of app \(funnel.app)"
                    + (answer.storeRebuilt ? " (columns read from the whole log)" : ", \(answer.newEvents) new")
                    + String(format: "; read %.2f s, ", answer.refreshSeconds)
                    + (answer.reusedAnswer ? "the answer counted before (no new events, no window closed since)" : String(format: "evaluated %.2f s", answer.evaluateSeconds)))
            if let logFrom = answer.logFrom {
                Console.info("the log holds app \(funnel.app)'s events received since \(logFrom); earlier months are archived (docs/lifecycle.md)")
            }
        }
        if let listing {
            try printPersons(listing, answer: answer, funnel: funnel, now: now, connection: connection)
            return
        }
        let generatedAt = Timestamps.format(microseconds: now)
        let days = ReportRange(from: from, to: to, generatedAt: generatedAt)
        if let paths {
            try list.printPaths(paths, days: answer.days(of: paths), funnel: funnel, format: range.format) {
                // The funnel's own page, the tree drawn under its report.
                let page = HTMLDashboard.pageNames(for: [funnel.name])[0]
                return HTMLDashboard(range: days).render([
                    DashboardFunnel(report: answer.report, secondsToComplete: answer.secondsToComplete, paths: $0),
                ])[page] ?? ""
            }
            return
        }
        switch range.format {
        case "json":
            let about = QueryTimeJSON.Query(
                asOf: generatedAt, from: from, to: to, events: answer.events, audiences: audiences, notAudiences: notAudiences,
                logFrom: answer.logFrom)
            print(QueryTimeJSON.render(answer.report, histogram: answer.histogram, query: about), terminator: "")
        case "html":
            let page = HTMLDashboard.pageNames(for: [funnel.name])[0]
            let files = HTMLDashboard(range: days).render([DashboardFunnel(report: answer.report, secondsToComplete: answer.secondsToComplete)])
            print(files[page] ?? "", terminator: "")
        default:
            print((ReportFormat(rawValue: range.format) ?? .table).render([answer.report], range: days), terminator: "")
        }
    }

    /// The cell's persons, as counted with the answer; a breakdown value
    /// the answer has none of is refused as bad input.
    private func printPersons(_ listing: PersonListAnalysis, answer: FunnelAnswer, funnel: Funnel, now: Int64, connection: Connection) throws {
        try PersonsOptions.refusingBadInput(flag: "--breakdown-value") { try listing.cell.check(against: answer.report) }
        let persons = listing.persons(of: answer.days(of: listing))
        var printer = list.printer(format: try list.format(range.format), funnel: funnel, cell: listing.cell, asOf: now) { connection }
        for person in persons { try printer.add(person) }
        try printer.finish(total: persons.count)
    }

    /// The funnel from --definition, or from the short flags (checked by the
    /// same parser as the configuration, so errors name the same fields).
    private func loadFunnel() throws -> Funnel {
        if let definition {
            let url = URL(fileURLWithPath: definition)
            guard let text = try? String(contentsOf: url, encoding: .utf8) else {
                throw ValidationError("--definition: cannot read \(definition)")
            }
            return try FunnelConfiguration.parseFunnel(yaml: text, source: definition)
        }
        var fields: [String: Any] = ["name": name, "app": app ?? "", "steps": try steps.map(StepFlag.parse)]
        if let window { fields["window"] = window }
        if !breakdowns.isEmpty { fields["breakdowns"] = breakdowns }
        if let order { fields["order"] = order }
        if let aggregateBy { fields["aggregate_by"] = aggregateBy }
        // JSON is YAML: the flags' values reach the parser quoted, never as syntax.
        let json = try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
        return try FunnelConfiguration.parseFunnel(yaml: String(decoding: json, as: UTF8.self), source: "command line")
    }
}

/// `--step 'otp_verified where properties.method=sms within 2m'`, as the
/// configuration's step mapping.
enum StepFlag {
    static func parse(_ text: String) throws -> [String: Any] {
        var words = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard let head = words.first else { throw ValidationError("--step: empty step") }
        words.removeFirst()
        var step: [String: Any] = head.hasPrefix("screen:") ? ["screen": String(head.dropFirst(7))] : ["event": head]
        while let word = words.first {
            words.removeFirst()
            switch word {
            case "where":
                guard let clause = words.first else { throw ValidationError("--step '\(text)': 'where' needs PATH=VALUE") }
                words.removeFirst()
                var conditions: [String: String] = [:]
                for pair in clause.split(separator: ",") {
                    let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                    guard parts.count == 2, !parts[0].isEmpty else {
                        throw ValidationError("--step '\(text)': expected PATH=VALUE after 'where' (got '\(pair)')")
                    }
                    conditions[parts[0]] = parts[1]
                }
                step["where"] = conditions
            case "within":
                guard let duration = words.first else { throw ValidationError("--step '\(text)': 'within' needs a duration such as 2m") }
                words.removeFirst()
                step["within"] = duration
            case "optional":
                step["optional"] = true
            default:
                throw ValidationError("--step '\(text)': unexpected '\(word)' (expected where, within or optional)")
            }
        }
        return step
    }
}
