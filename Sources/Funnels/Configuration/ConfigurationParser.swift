import Foundation
import Yams

/// Turns configuration YAML into validated `FunnelConfiguration` values.
///
/// Validation happens here, once, so the engine can assume well-formed
/// funnels: at least one step, required first and last steps, known apps,
/// unique names, resolvable target steps.
struct ConfigurationParser {
    let source: String

    private static let funnelKeys: Set<String> = [
        "name", "app", "window", "breakdowns", "steps", "exclude", "targets", "description", "diagnostics", "alerts",
        "retention", "order", "ignore", "hold", "attribution", "aggregate_by",
    ]
    private static let alertKeys: Set<String> = [
        "alpha", "min_effect", "min_time_effect", "min_persons", "recent_days", "baseline_days",
    ]
    private static let diagnosticsKeys: Set<String> = ["min_support"]
    private static let retentionKeys: Set<String> = ["days", "active_events"]
    static let stepKeys: Set<String> = ["name", "event", "screen", "where", "any_of", "optional", "within"]
    private static let exclusionKeys: Set<String> = ["event", "screen", "where", "between"]
    static let matcherKeys: Set<String> = ["event", "screen", "where"]
    private static let targetKeys: Set<String> = ["name", "metric", "threshold", "min", "max", "from", "to"]

    func parse(yaml: String) throws(ConfigurationError) -> FunnelConfiguration {
        let root: Node?
        do {
            // Every value is read from its text (`YAMLReader`), never from a
            // resolved tag: the default resolver compiles seven regular
            // expressions on first use, milliseconds of every command's start.
            root = try Yams.compose(yaml: yaml, .basic)
        } catch {
            throw ConfigurationError(source: source, message: "invalid YAML: \(error)")
        }
        let reader = YAMLReader(source: source)
        guard let root else { throw reader.error("", "empty configuration") }
        do {
            return try parse(root: root, reader: reader)
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError(source: source, message: "\(error)")
        }
    }

    /// One funnel on its own, as one entry of `funnels:` with its `app`
    /// (a query-time funnel): checked as a configured one is, its app taken as declared.
    func parseFunnel(yaml: String) throws(ConfigurationError) -> Funnel {
        let reader = YAMLReader(source: source)
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml, .basic)
        } catch {
            throw ConfigurationError(source: source, message: "invalid YAML: \(error)")
        }
        guard var node = root else { throw reader.error("", "empty definition: expected one funnel (name, app, steps, …)") }
        do {
            if case .sequence(let items) = node {
                guard items.count == 1, let only = items.first else {
                    throw reader.error("", "expected one funnel, got a list of \(items.count)")
                }
                node = only
            }
            let fields = Dictionary(try reader.mapping(node, "", expected: "expected one funnel: a mapping with name, app and steps"),
                                    uniquingKeysWith: { first, _ in first })
            if fields["funnels"] != nil || fields["apps"] != nil {
                throw reader.error("", "expected one funnel (one entry of 'funnels:' with its app), not a whole configuration")
            }
            var app = ""
            if let appNode = fields["app"] { app = try reader.nonEmptyString(appNode, "app") }
            return try parseFunnel(node, field: "funnel", apps: [AppConfiguration(name: app)], reader: reader)
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError(source: source, message: "\(error)")
        }
    }

    private func parse(root: Node, reader: YAMLReader) throws -> FunnelConfiguration {
        let top = Dictionary(
            try reader.mapping(root, "", expected: "expected a mapping with 'apps' and 'funnels'"),
            uniquingKeysWith: { first, _ in first }
        )
        var reportTimeZone: String?
        if let node = top["report_time_zone"], !YAMLReader.isNull(node) {
            let identifier = try reader.nonEmptyString(node, "report_time_zone")
            try checkTimeZone(identifier, reader: reader, field: "report_time_zone")
            reportTimeZone = identifier
        }

        var apps: [AppConfiguration] = []
        if let node = top["apps"], !YAMLReader.isNull(node) {
            for (index, item) in try reader.sequence(node, "apps").enumerated() {
                let app = try parseApp(item, field: "apps[\(index)]", reader: reader)
                guard !apps.contains(where: { $0.name == app.name }) else {
                    throw reader.within("app '\(app.name)'").error("name", "duplicate app name")
                }
                apps.append(app)
            }
        }

        var funnels: [Funnel] = []
        guard let funnelsNode = top["funnels"], !YAMLReader.isNull(funnelsNode) else {
            throw reader.error("funnels", "missing: at least one funnel is required")
        }
        for (index, item) in try reader.sequence(funnelsNode, "funnels").enumerated() {
            let funnel = try parseFunnel(item, field: "funnels[\(index)]", apps: apps, reader: reader)
            guard !funnels.contains(where: { $0.name == funnel.name }) else {
                throw reader.within("funnel '\(funnel.name)'").error("name", "duplicate funnel name")
            }
            funnels.append(funnel)
        }
        var configuration = FunnelConfiguration(reportTimeZone: reportTimeZone, apps: apps, funnels: funnels)
        if let node = top["audiences"], !YAMLReader.isNull(node) {
            configuration.audiences = try parseAudiences(node, configuration: configuration, reader: reader)
        }
        try checkAudienceBreakdowns(configuration, reader: reader)
        if let node = top["archive"], !YAMLReader.isNull(node) {
            configuration.archive = try parseArchive(node, configuration: configuration, reader: reader)
        }
        return configuration
    }

    /// `archive: {keep_events, directory}`: a horizon no funnel's window and
    /// retention reach past, and a directory (checked when an archive runs).
    private func parseArchive(_ node: Node, configuration: FunnelConfiguration, reader: YAMLReader) throws -> ArchiveSettings {
        let entries = Dictionary(
            try reader.mapping(node, "archive", expected: "expected a mapping with keep_events and directory"),
            uniquingKeysWith: { first, _ in first })
        if let unknown = entries.keys.sorted().first(where: { !["keep_events", "directory"].contains($0) }) {
            throw reader.error("archive.\(unknown)", "unknown key (expected keep_events or directory)")
        }
        guard let keepNode = entries["keep_events"] else {
            throw reader.error("archive.keep_events", "missing: how long the log keeps events, such as 13 months")
        }
        let text = try reader.scalar(keepNode, "archive.keep_events")
        guard let keep = ArchiveSettings.Keep(text: text) else {
            throw reader.error("archive.keep_events", "expected a number of months or days, such as 13 months or 400 days (got '\(text)')")
        }
        let least = configuration.leastDaysKept
        guard keep.leastDays >= least else {
            throw reader.error(
                "archive.keep_events",
                "\(keep) is shorter than the longest funnel window plus retention's last day (\(least) days): "
                    + "the reports would lose events they still count")
        }
        guard let directoryNode = entries["directory"] else {
            throw reader.error("archive.directory", "missing: where the archive files go")
        }
        let directory = try reader.nonEmptyString(directoryNode, "archive.directory")
        return ArchiveSettings(keepEvents: keep, directory: directory)
    }

    private func checkTimeZone(_ identifier: String, reader: YAMLReader, field: String) throws {
        guard TimeZone(identifier: identifier) != nil else {
            throw reader.error(field, "unknown time zone '\(identifier)' (expected an IANA name such as Europe/Paris)")
        }
    }

    // MARK: Apps

    private func parseApp(_ node: Node, field: String, reader: YAMLReader) throws -> AppConfiguration {
        let entries = Dictionary(try reader.mapping(node, field), uniquingKeysWith: { first, _ in first })
        guard let nameNode = entries["name"] else { throw reader.error("\(field).name", "missing") }
        let name = try reader.nonEmptyString(nameNode, "\(field).name")
        let reader = reader.within("app '\(name)'")
        var app = AppConfiguration(name: name)
        if let node = entries["pii_properties"], !YAMLReader.isNull(node) {
            app.piiProperties = try reader.stringList(node, "pii_properties")
        }
        if let node = entries["pii_mode"], !YAMLReader.isNull(node) {
            let text = try reader.scalar(node, "pii_mode")
            guard let mode = AppConfiguration.PIIMode(rawValue: text) else {
                throw reader.error("pii_mode", "expected 'remove' or 'hash', got '\(text)'")
            }
            app.piiMode = mode
        }
        if let node = entries["time_zone"], !YAMLReader.isNull(node) {
            let identifier = try reader.nonEmptyString(node, "time_zone")
            try checkTimeZone(identifier, reader: reader, field: "time_zone")
            app.timeZone = identifier
        }
        if let node = entries["tracking_plan"], !YAMLReader.isNull(node) {
            app.trackingPlan = try parseTrackingPlan(node, reader: reader)
        }
        return app
    }

    /// `tracking_plan: {enforce: false, events: [{event: NAME, properties: {PATH: TYPE}}, {screen: NAME}]}`.
    private func parseTrackingPlan(_ node: Node, reader: YAMLReader) throws -> TrackingPlan {
        let fields = Dictionary(try reader.mapping(node, "tracking_plan"), uniquingKeysWith: { first, _ in first })
        for key in fields.keys where !["enforce", "events"].contains(key) {
            throw reader.error("tracking_plan.\(key)", "unknown field (expected enforce, events)")
        }
        var plan = TrackingPlan(entries: [])
        if let node = fields["enforce"], !YAMLReader.isNull(node) { plan.enforce = try reader.bool(node, "tracking_plan.enforce") }
        guard let events = fields["events"], !YAMLReader.isNull(events) else {
            throw reader.error("tracking_plan.events", "missing: list the events and screens the app sends")
        }
        for (index, item) in try reader.sequence(events, "tracking_plan.events").enumerated() {
            let field = "tracking_plan.events[\(index)]"
            let entry = Dictionary(try reader.mapping(item, field), uniquingKeysWith: { first, _ in first })
            for key in entry.keys where !["event", "screen", "properties"].contains(key) {
                throw reader.error("\(field).\(key)", "unknown field (expected event or screen, and properties)")
            }
            let kind: EventMatcher.Kind
            let name: String
            switch (entry["event"], entry["screen"]) {
            case (let node?, nil): (kind, name) = (.event, try reader.nonEmptyString(node, "\(field).event"))
            case (nil, let node?): (kind, name) = (.screen, try reader.nonEmptyString(node, "\(field).screen"))
            default: throw reader.error(field, "expected exactly one of 'event' or 'screen'")
            }
            guard !plan.entries.contains(where: { $0.kind == kind && $0.name == name }) else {
                throw reader.error(field, "\(kind == .event ? "event" : "screen") '\(name)' is planned twice")
            }
            var properties: [String: TrackingPlan.JSONType] = [:]
            if let node = entry["properties"], !YAMLReader.isNull(node) {
                for (path, typeNode) in try reader.mapping(node, "\(field).properties") {
                    let text = try reader.scalar(typeNode, "\(field).properties.\(path)")
                    guard let type = TrackingPlan.JSONType(rawValue: text) else {
                        let known = TrackingPlan.JSONType.allCases.map(\.rawValue).joined(separator: ", ")
                        throw reader.error("\(field).properties.\(path)", "expected a JSON type (\(known)), got '\(text)'")
                    }
                    let bare = path.hasPrefix("properties.") ? String(path.dropFirst("properties.".count)) : path
                    let keys = bare.split(separator: ".", omittingEmptySubsequences: false)
                    guard !bare.isEmpty, !keys.contains(""), keys.count <= 4 else {
                        throw reader.error("\(field).properties.\(path)", "expected a property path at most four keys deep, such as plan.tier")
                    }
                    properties[bare] = type
                }
            }
            plan.entries.append(TrackingPlan.Entry(kind: kind, name: name, properties: properties))
        }
        return plan
    }

    // MARK: Funnels

    private func parseFunnel(_ node: Node, field: String, apps: [AppConfiguration], reader: YAMLReader) throws -> Funnel {
        guard case .mapping = node else { throw reader.error(field, "expected a mapping") }
        let nameNode = try reader.mapping(node, field).first { $0.key == "name" }?.value
        guard let nameNode else { throw reader.error("\(field).name", "missing") }
        let name = try reader.nonEmptyString(nameNode, "\(field).name")
        let reader = reader.within("funnel '\(name)'")
        let fields = try reader.object(node, "", allowed: Self.funnelKeys)

        guard let appNode = fields["app"] else { throw reader.error("app", "missing") }
        let app = try reader.nonEmptyString(appNode, "app")
        guard apps.contains(where: { $0.name == app }) else {
            throw reader.error("app", "app '\(app)' is not declared under 'apps'")
        }

        var window = Funnel.defaultWindowSeconds
        if let node = fields["window"] {
            let text = try reader.scalar(node, "window")
            guard let seconds = WindowDuration.seconds(from: text) else {
                throw reader.error("window", "cannot parse '\(text)' (expected e.g. 24h, 30m, 90s, 2d or whole seconds)")
            }
            window = seconds
        }

        var breakdowns = Funnel.defaultBreakdowns
        if let node = fields["breakdowns"] {
            breakdowns = try reader.stringList(node, "breakdowns")
            if let duplicate = firstDuplicate(breakdowns) {
                throw reader.error("breakdowns", "'\(duplicate)' is listed twice")
            }
            // An audience (`audience:NAME`) is checked once the audiences are read (`checkAudienceBreakdowns`).
            for (index, path) in breakdowns.enumerated() where !Self.isMessagePath(path) && AudienceBreakdown.audience(of: path) == nil {
                throw reader.error("breakdowns[\(index)]", "'\(path)' \(Self.pathExpected), nor audience:NAME")
            }
        }

        guard let stepsNode = fields["steps"] else { throw reader.error("steps", "missing") }
        let stepNodes = try reader.sequence(stepsNode, "steps")
        guard !stepNodes.isEmpty else { throw reader.error("steps", "must list at least one step") }
        var explicitNames: [String?] = []
        var matchers: [[EventMatcher]] = []
        var optional: [Bool] = []
        var within: [Int64?] = []
        for (index, stepNode) in stepNodes.enumerated() {
            let step = try parseStep(stepNode, field: "steps[\(index)]", reader: reader)
            explicitNames.append(step.name)
            matchers.append(step.matchers)
            optional.append(step.optional)
            within.append(step.within)
        }
        if optional.first == true { throw reader.error("steps[0].optional", "the first step cannot be optional") }
        if optional.last == true {
            throw reader.error("steps[\(optional.count - 1)].optional", "the last step cannot be optional")
        }
        if let duplicate = firstDuplicate(explicitNames.compactMap { $0 }),
           let index = explicitNames.lastIndex(of: duplicate) {
            throw reader.error("steps[\(index)].name", "duplicate step name '\(duplicate)'")
        }
        let names = StepNaming.resolve(explicit: explicitNames, matchers: matchers)
        let steps = names.indices.map {
            var step = FunnelStep(name: names[$0], matchers: matchers[$0], isOptional: optional[$0])
            step.within = within[$0]
            return step
        }
        for (index, limit) in within.enumerated() where limit != nil {
            let field = "steps[\(index)].within"
            if index == 0 { throw reader.error(field, "the first step has no previous step to be within") }
            if optional[index] { throw reader.error(field, "an optional step takes no within (it is measured between required steps)") }
        }

        var exclusions: [Exclusion] = []
        if let node = fields["exclude"] {
            for (index, item) in try reader.sequence(node, "exclude").enumerated() {
                exclusions.append(try parseExclusion(item, field: "exclude[\(index)]", steps: steps, reader: reader))
            }
        }

        var funnel = Funnel(
            name: name, app: app, windowSeconds: window, steps: steps,
            breakdowns: breakdowns, exclusions: exclusions
        )
        if let node = fields["targets"] {
            for (index, item) in try reader.sequence(node, "targets").enumerated() {
                let target = try parseTarget(item, field: "targets[\(index)]", funnel: funnel, reader: reader)
                guard !funnel.targets.contains(where: { $0.name == target.name }) else {
                    throw reader.error("targets[\(index)].name", "duplicate target name '\(target.name)'")
                }
                funnel.targets.append(target)
            }
        }
        if let node = fields["diagnostics"] {
            let settings = try reader.object(node, "diagnostics", allowed: Self.diagnosticsKeys)
            if let node = settings["min_support"] {
                let value = try reader.number(node, "diagnostics.min_support")
                guard value >= 1, value <= 1_000_000_000, value == value.rounded() else {
                    throw reader.error("diagnostics.min_support", "expected a whole number of persons, at least 1 (got \(value))")
                }
                funnel.minSupport = Int(value)
            }
        }
        if let node = fields["alerts"] {
            funnel.alerts = try parseAlerts(node, reader: reader)
        }
        if let node = fields["retention"] {
            funnel.retention = try parseRetention(node, reader: reader)
        }
        try parseOptions(fields, into: &funnel, reader: reader)
        return funnel
    }

    /// `order`, `ignore`, `hold`, `attribution` and `aggregate_by`, and what `order: any` rules out.
    private func parseOptions(_ fields: [String: Node], into funnel: inout Funnel, reader: YAMLReader) throws {
        if let node = fields["order"] {
            let text = try reader.scalar(node, "order")
            guard let order = Funnel.Order(rawValue: text) else {
                throw reader.error("order", "expected ordered, strict or any (got '\(text)')")
            }
            funnel.order = order
        }
        if let node = fields["ignore"] {
            guard funnel.order == .strict else { throw reader.error("ignore", "only applies with order: strict") }
            let items = try reader.sequence(node, "ignore", expected: "expected a list of matchers")
            funnel.ignore = try items.enumerated().map { index, item in try parseMatcher(item, field: "ignore[\(index)]", reader: reader) }
        }
        if let node = fields["hold"] {
            let paths = try reader.stringList(node, "hold")
            guard !paths.isEmpty else { throw reader.error("hold", "must list at least one path (leave it out to hold nothing)") }
            // Only these hold a message's paths; any other would leave every step event without the value.
            for (index, path) in paths.enumerated() where !Self.isMessagePath(path) {
                throw reader.error("hold[\(index)]", "'\(path)' \(Self.pathExpected)")
            }
            if let duplicate = firstDuplicate(paths) { throw reader.error("hold", "'\(duplicate)' is listed twice") }
            funnel.hold = paths
        }
        if let node = fields["attribution"] {
            funnel.attribution = try parseAttribution(node, steps: funnel.steps, reader: reader)
        }
        if let node = fields["aggregate_by"] {
            let text = try reader.scalar(node, "aggregate_by")
            guard let aggregation = Funnel.Aggregation(rawValue: text) else {
                throw reader.error("aggregate_by", "expected person or group (got '\(text)')")
            }
            funnel.aggregateBy = aggregation
        }
        guard funnel.order == .any else { return }
        // Without an order, there is no previous step and no step between others.
        for (index, step) in funnel.steps.enumerated() {
            if step.within != nil { throw reader.error("steps[\(index)].within", "does not apply with order: any") }
            if step.isOptional { throw reader.error("steps[\(index)].optional", "does not apply with order: any") }
        }
        for (index, exclusion) in funnel.exclusions.enumerated() where exclusion.between != nil {
            throw reader.error("exclude[\(index)].between", "does not apply with order: any")
        }
        if case .step = funnel.attribution { throw reader.error("attribution", "{step: N} does not apply with order: any") }
        for (index, target) in funnel.targets.enumerated() {
            guard case .conversion = target.metric else { continue }
            throw reader.error(
                "targets[\(index)]", "a conversion between named steps does not apply with order: any (its rows count steps done, whichever)")
        }
    }

    /// `first_step`, `last_step` or `{step: N}`, N counting the steps as written from 1.
    private func parseAttribution(_ node: Node, steps: [FunnelStep], reader: YAMLReader) throws -> Funnel.Attribution {
        if case .mapping = node {
            let fields = try reader.object(node, "attribution", allowed: ["step"])
            guard let stepNode = fields["step"] else { throw reader.error("attribution", "expected {step: N}") }
            let value = try reader.number(stepNode, "attribution.step")
            guard value == value.rounded(), value >= 1, value <= Double(steps.count) else {
                throw reader.error("attribution.step", "expected a step number from 1 to \(steps.count) (got \(value))")
            }
            return .step(Int(value) - 1)
        }
        let text = try reader.scalar(node, "attribution")
        switch text {
        case "first_step": return .firstStep
        case "last_step": return .lastStep
        default: throw reader.error("attribution", "expected first_step, last_step or {step: N} (got '\(text)')")
        }
    }

    /// An `exclude:` entry: a matcher, and `between: [i, j]`, two required steps numbered from 1, i before j.
    private func parseExclusion(_ node: Node, field: String, steps: [FunnelStep], reader: YAMLReader) throws -> Exclusion {
        var fields = try reader.object(node, field, allowed: Self.exclusionKeys)
        let betweenNode = fields.removeValue(forKey: "between")
        var exclusion = Exclusion(try parseMatcherFields(fields, field: field, reader: reader))
        guard let betweenNode else { return exclusion }
        let betweenField = "\(field).between"
        let items = try reader.sequence(betweenNode, betweenField, expected: "expected two step numbers such as [2, 3]")
        guard items.count == 2 else { throw reader.error(betweenField, "expected two step numbers such as [2, 3] (got \(items.count))") }
        var bounds: [Int] = []
        for (index, item) in items.enumerated() {
            let value = try reader.number(item, "\(betweenField)[\(index)]")
            guard value == value.rounded(), value >= 1, value <= Double(steps.count) else {
                throw reader.error("\(betweenField)[\(index)]", "expected a step number from 1 to \(steps.count) (got \(value))")
            }
            guard !steps[Int(value) - 1].isOptional else {
                throw reader.error("\(betweenField)[\(index)]", "step \(Int(value)) is optional; exclusions are bounded by required steps")
            }
            bounds.append(Int(value) - 1)
        }
        guard bounds[0] < bounds[1] else { throw reader.error(betweenField, "the first step must come before the second") }
        exclusion.between = bounds[0]...bounds[1]
        return exclusion
    }

    /// Each `audience:NAME` breakdown names an audience of the funnel's app
    /// that counts what the funnel counts (persons or groups).
    private func checkAudienceBreakdowns(_ configuration: FunnelConfiguration, reader: YAMLReader) throws {
        for funnel in configuration.funnels {
            let reader = reader.within("funnel '\(funnel.name)'")
            for (index, dimension) in funnel.breakdowns.enumerated() {
                guard let name = AudienceBreakdown.audience(of: dimension) else { continue }
                let field = "breakdowns[\(index)]"
                guard let audience = configuration.audience(named: name) else {
                    let known = configuration.audiences(forApp: funnel.app).map { "'\($0.name)'" }
                    throw reader.error(
                        field, "unknown audience '\(name)' (\(known.isEmpty ? "app '\(funnel.app)' has none" : "audiences of app '\(funnel.app)' are \(known.joined(separator: ", "))"))")
                }
                guard audience.app == funnel.app else {
                    throw reader.error(field, "audience '\(name)' is of app '\(audience.app)', the funnel of app '\(funnel.app)'")
                }
                guard audience.aggregateBy == funnel.aggregateBy else {
                    throw reader.error(
                        field, "audience '\(name)' holds \(audience.aggregateBy.rawValue)s, the funnel counts \(funnel.aggregateBy.rawValue)s")
                }
            }
        }
    }

    /// A dotted path under one of the message's three JSON roots: the only
    /// places a funnel can read a value from, so any other path would
    /// silently match nothing, hold nothing or break down as "(none)".
    private static func isMessagePath(_ path: String) -> Bool {
        !path.hasSuffix(".") && !path.contains("..") && ["properties.", "context.", "traits."].contains(where: path.hasPrefix)
    }

    private static let pathExpected = "is not a path under properties., context. or traits. (such as context.os.name)"

    /// `retention:` — whole days from 0 to `RetentionSettings.maximumDay`,
    /// each once, and matchers for the events that show activity.
    private func parseRetention(_ node: Node, reader: YAMLReader) throws -> RetentionSettings {
        let fields = try reader.object(node, "retention", allowed: Self.retentionKeys)
        var settings = RetentionSettings()
        if let node = fields["days"] {
            let items = try reader.sequence(node, "retention.days", expected: "expected a list of days such as [1, 7, 30]")
            guard !items.isEmpty else { throw reader.error("retention.days", "must list at least one day") }
            var days: [Int] = []
            for (index, item) in items.enumerated() {
                let value = try reader.number(item, "retention.days[\(index)]")
                guard value >= 0, value <= Double(RetentionSettings.maximumDay), value == value.rounded() else {
                    throw reader.error(
                        "retention.days[\(index)]",
                        "expected a whole number of days from 0 to \(RetentionSettings.maximumDay) (got \(value))")
                }
                guard !days.contains(Int(value)) else {
                    throw reader.error("retention.days[\(index)]", "day \(Int(value)) is listed twice")
                }
                days.append(Int(value))
            }
            settings.days = days.sorted()
        }
        if let node = fields["active_events"] {
            let items = try reader.sequence(node, "retention.active_events", expected: "expected a list of matchers")
            guard !items.isEmpty else {
                throw reader.error("retention.active_events", "must list at least one matcher (leave it out to count any event)")
            }
            settings.activeEvents = try items.enumerated().map { index, item in
                try parseMatcher(item, field: "retention.active_events[\(index)]", reader: reader)
            }
        }
        return settings
    }

    /// `alerts:` — each threshold checked for its range, named when wrong.
    private func parseAlerts(_ node: Node, reader: YAMLReader) throws -> AlertSettings {
        let fields = try reader.object(node, "alerts", allowed: Self.alertKeys)
        var settings = AlertSettings()
        func fraction(_ key: String, open: Bool) throws -> Double? {
            guard let node = fields[key] else { return nil }
            let value = try reader.number(node, "alerts.\(key)")
            guard value > 0 || (!open && value == 0), value < 1 else {
                throw reader.error("alerts.\(key)", "expected a fraction \(open ? "between 0 and 1" : "from 0 to below 1") (got \(value))")
            }
            return value
        }
        func whole(_ key: String) throws -> Int? {
            guard let node = fields[key] else { return nil }
            let value = try reader.number(node, "alerts.\(key)")
            guard value >= 1, value <= 100_000_000, value == value.rounded() else {
                throw reader.error("alerts.\(key)", "expected a whole number, at least 1 (got \(value))")
            }
            return Int(value)
        }
        if let value = try fraction("alpha", open: true) { settings.alpha = value }
        if let value = try fraction("min_effect", open: false) { settings.minEffect = value }
        if let node = fields["min_time_effect"] {
            let value = try reader.number(node, "alerts.min_time_effect")
            guard value >= 0, value <= 100 else {
                throw reader.error("alerts.min_time_effect", "expected a relative change such as 0.2 for +20 % (got \(value))")
            }
            settings.minTimeEffect = value
        }
        if let value = try whole("min_persons") { settings.minPersons = value }
        if let value = try whole("recent_days") { settings.recentDays = value }
        if let value = try whole("baseline_days") { settings.baselineDays = value }
        return settings
    }

    func parseStep(
        _ node: Node, field: String, reader: YAMLReader
    ) throws -> (name: String?, matchers: [EventMatcher], optional: Bool, within: Int64?) {
        var fields = try reader.object(node, field, allowed: Self.stepKeys)
        let name = try fields["name"].map { try reader.nonEmptyString($0, "\(field).name") }
        let optional = try fields["optional"].map { try reader.bool($0, "\(field).optional") } ?? false
        var within: Int64?
        if let node = fields.removeValue(forKey: "within") {
            let text = try reader.scalar(node, "\(field).within")
            guard let seconds = WindowDuration.seconds(from: text) else {
                throw reader.error("\(field).within", "cannot parse '\(text)' (expected e.g. 2m, 90s, 1h or whole seconds)")
            }
            within = seconds
        }
        if let anyOf = fields["any_of"] {
            for key in ["event", "screen", "where"] where fields[key] != nil {
                throw reader.error("\(field).\(key)", "cannot be combined with any_of (put it inside each alternative)")
            }
            let items = try reader.sequence(anyOf, "\(field).any_of", expected: "expected a list of matchers")
            guard !items.isEmpty else { throw reader.error("\(field).any_of", "must list at least one matcher") }
            let matchers = try items.enumerated().map { index, item in
                try parseMatcher(item, field: "\(field).any_of[\(index)]", reader: reader)
            }
            return (name, matchers, optional, within)
        }
        let matcher = try parseMatcherFields(fields, field: field, reader: reader)
        return (name, [matcher], optional, within)
    }

    func parseMatcher(_ node: Node, field: String, reader: YAMLReader) throws -> EventMatcher {
        let fields = try reader.object(node, field, allowed: Self.matcherKeys)
        return try parseMatcherFields(fields, field: field, reader: reader)
    }

    func parseMatcherFields(_ fields: [String: Node], field: String, reader: YAMLReader) throws -> EventMatcher {
        let kind: EventMatcher.Kind
        let nameNode: Node
        switch (fields["event"], fields["screen"]) {
        case (let event?, nil): kind = .event; nameNode = event
        case (nil, let screen?): kind = .screen; nameNode = screen
        case (.some, .some):
            throw reader.error(field, "a step matches either an 'event' or a 'screen', not both")
        case (nil, nil):
            throw reader.error(field, "expected 'event', 'screen' or 'any_of'")
        }
        let name = try reader.nonEmptyString(nameNode, "\(field).\(kind.rawValue)")
        var conditions: [String: String] = [:]
        if let whereNode = fields["where"] {
            let whereField = "\(field).where"
            let expected = "expected a mapping of path to value"
            for (path, value) in try reader.mapping(whereNode, whereField, expected: expected) {
                guard Self.isMessagePath(path) else { throw reader.error(whereField, "'\(path)' \(Self.pathExpected)") }
                conditions[path] = try reader.scalar(value, "\(whereField).\(path)", expected: "expected a single value to compare with")
            }
        }
        return EventMatcher(kind: kind, name: name, conditions: conditions)
    }

    // MARK: Targets

    private func parseTarget(_ node: Node, field: String, funnel: Funnel, reader: YAMLReader) throws -> FunnelTarget {
        let fields = try reader.object(node, field, allowed: Self.targetKeys)
        guard let metricNode = fields["metric"] else { throw reader.error("\(field).metric", "missing") }
        let metricName = try reader.scalar(metricNode, "\(field).metric")
        let metric: FunnelTarget.Metric
        switch metricName {
        case "completion_rate": metric = .completionRate
        case "median_seconds_to_complete": metric = .medianSecondsToComplete
        case "p90_seconds_to_complete": metric = .p90SecondsToComplete
        case "conversion":
            let from = try requiredStep(fields["from"], field: "\(field).from", funnel: funnel, reader: reader)
            let to = try requiredStep(fields["to"], field: "\(field).to", funnel: funnel, reader: reader)
            guard from.index < to.index else {
                throw reader.error("\(field).to", "step '\(to.name)' must come after '\(from.name)'")
            }
            metric = .conversion(from: from.name, to: to.name)
        default:
            throw reader.error(
                "\(field).metric",
                "unknown metric '\(metricName)' (expected completion_rate, median_seconds_to_complete, p90_seconds_to_complete or conversion)"
            )
        }
        if metricName != "conversion" {
            for key in ["from", "to"] where fields[key] != nil {
                throw reader.error("\(field).\(key)", "only a 'conversion' target takes from/to")
            }
        }

        let lower = try fields["threshold"].map { try reader.number($0, "\(field).threshold") }
        let minimum = try fields["min"].map { try reader.number($0, "\(field).min") }
        let maximum = try fields["max"].map { try reader.number($0, "\(field).max") }
        let bound: FunnelTarget.Bound
        switch (lower ?? minimum, maximum) {
        case (let value?, nil) where lower == nil || minimum == nil: bound = .atLeast(value)
        case (nil, let value?): bound = .atMost(value)
        default:
            throw reader.error(field, "expected exactly one of 'threshold' (or 'min') and 'max'")
        }
        let isRate = metricName == "completion_rate" || metricName == "conversion"
        if isRate, !(0...1).contains(bound.limit) {
            throw reader.error(field, "a rate threshold must be between 0 and 1, got \(bound.limit)")
        }
        if !isRate, bound.limit < 0 {
            throw reader.error(field, "a duration limit cannot be negative")
        }
        let name = try fields["name"].map { try reader.nonEmptyString($0, "\(field).name") } ?? metricName
        return FunnelTarget(name: name, metric: metric, bound: bound)
    }

    private func requiredStep(
        _ node: Node?, field: String, funnel: Funnel, reader: YAMLReader
    ) throws -> (name: String, index: Int) {
        guard let node else { throw reader.error(field, "missing (a conversion target needs 'from' and 'to')") }
        let name = try reader.nonEmptyString(node, field)
        guard let index = funnel.stepIndex(named: name) else {
            let known = funnel.steps.map { "'\($0.name)'" }.joined(separator: ", ")
            throw reader.error(field, "unknown step '\(name)' (steps are \(known))")
        }
        guard !funnel.steps[index].isOptional else {
            throw reader.error(field, "step '\(name)' is optional; conversions are measured between required steps")
        }
        return (name, index)
    }

    private func firstDuplicate(_ values: [String]) -> String? {
        var seen = Set<String>()
        return values.first { !seen.insert($0).inserted }
    }
}
