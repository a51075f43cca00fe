import Foundation
import Yams

/// `audiences:` (docs/audiences.md): each entry is checked like a funnel,
/// its errors naming the file, the audience and the field; references to
/// other audiences are resolved into one tree per audience, a cycle refused.
extension ConfigurationParser {
    private static let audienceKeys: Set<String> = [
        "name", "app", "aggregate_by", "description", "deliver", "funnel", "outcome", "step", "stalled", "days", "did", "did_not",
        "all_of", "any_of", "not", "audience",
    ]
    private static let operandKeys = audienceKeys.subtracting(["name", "app", "aggregate_by", "description", "deliver"])
    private static let behaviourKeys: Set<String> = ["event", "screen", "where", "any_of", "times", "within"]
    private static let deliverKeys: Set<String> = ["url", "on", "traits", "backfill", "secret_file", "max_attempts"]
    private static let forms = ["funnel", "did", "did_not", "all_of", "any_of", "not", "audience"]

    /// An operand as written: another audience's name stays a name until every audience is read.
    private indirect enum Written {
        case funnel(FunnelStanding)
        case behaviour(Behaviour)
        case allOf([Written])
        case anyOf([Written])
        case not(Written)
        case audience(String, field: String)
    }

    private struct Entry {
        var name: String
        var app: String?
        var aggregateBy: Funnel.Aggregation?
        var description: String?
        var delivery: AudienceDelivery?
        var condition: Written
    }

    func parseAudiences(_ node: Node, configuration: FunnelConfiguration, reader: YAMLReader) throws -> [Audience] {
        var entries: [Entry] = []
        for (index, item) in try reader.sequence(node, "audiences").enumerated() {
            let field = "audiences[\(index)]"
            guard case .mapping = item else { throw reader.error(field, "expected a mapping") }
            guard let nameNode = try reader.mapping(item, field).first(where: { $0.key == "name" })?.value else {
                throw reader.error("\(field).name", "missing")
            }
            let name = try reader.nonEmptyString(nameNode, "\(field).name")
            let reader = reader.within("audience '\(name)'")
            guard !entries.contains(where: { $0.name == name }) else { throw reader.error("name", "duplicate audience name") }
            let fields = try reader.object(item, "", allowed: Self.audienceKeys)
            var entry = Entry(name: name, condition: try parseOperand(fields, field: "", configuration: configuration, reader: reader))
            if let node = fields["app"] { entry.app = try reader.nonEmptyString(node, "app") }
            if let node = fields["aggregate_by"] {
                let text = try reader.scalar(node, "aggregate_by")
                guard let unit = Funnel.Aggregation(rawValue: text) else {
                    throw reader.error("aggregate_by", "expected person or group (got '\(text)')")
                }
                entry.aggregateBy = unit
            }
            if let node = fields["description"] { entry.description = try reader.scalar(node, "description") }
            if let node = fields["deliver"] { entry.delivery = try parseDelivery(node, reader: reader) }
            entries.append(entry)
        }
        let byName = Dictionary(entries.map { ($0.name, $0) }) { first, _ in first }
        return try entries.map { entry in
            let reader = reader.within("audience '\(entry.name)'")
            let condition = try resolve(entry.condition, of: entry.name, path: [entry.name], byName: byName, reader: reader)
            let (apps, units) = Self.sources(entry.condition, byName: byName, seen: [entry.name])
            guard let app = entry.app ?? apps.first else {
                throw reader.error("app", "missing: an audience of behaviour alone names its app")
            }
            if let other = apps.first(where: { $0 != app }) {
                throw reader.error(entry.app == nil ? "" : "app", "its operands are of apps '\(app)' and '\(other)': an audience is of one app")
            }
            guard configuration.app(named: app) != nil else { throw reader.error("app", "app '\(app)' is not declared under 'apps'") }
            guard !configuration.funnels(forApp: app).isEmpty else {
                throw reader.error("app", "app '\(app)' has no funnel: audiences are kept by the nightly job, which reads its funnels' apps")
            }
            if units.count > 1 {
                throw reader.error("", "its operands count persons and groups: all must count the same (aggregate_by)")
            }
            let unit = entry.aggregateBy ?? units.first ?? .person
            if let counted = units.first, counted != unit {
                throw reader.error("aggregate_by", "is \(unit.rawValue), but its funnels count \(counted.rawValue)s")
            }
            if unit == .group, !configuration.funnels(forApp: app).contains(where: { $0.aggregateBy == .group }) {
                throw reader.error("aggregate_by", "app '\(app)' has no funnel counting groups: its groups are not read")
            }
            return Audience(
                name: entry.name, app: app, aggregateBy: unit, condition: condition, description: entry.description,
                delivery: entry.delivery)
        }
    }

    /// One operand: exactly one of the forms, with the fields that form takes.
    private func parseOperand(_ fields: [String: Node], field: String, configuration: FunnelConfiguration, reader: YAMLReader) throws -> Written {
        let given = Self.forms.filter { fields[$0] != nil }
        guard given.count == 1, let form = given.first, let node = fields[form] else {
            let expected = "expected exactly one of funnel, did, did_not, all_of, any_of, not or audience"
            throw reader.error(field, given.isEmpty ? expected : "\(expected) (got \(given.joined(separator: " and ")))")
        }
        let funnelOnly = ["outcome", "step", "stalled", "days"]
        if form != "funnel", let stray = funnelOnly.first(where: { fields[$0] != nil }) {
            throw reader.error(reader.join(field, stray), "only applies to a funnel operand")
        }
        let at = { (key: String) in reader.join(field, key) }
        switch form {
        case "funnel":
            return .funnel(try parseStanding(fields, name: node, field: field, configuration: configuration, reader: reader))
        case "did", "did_not":
            return .behaviour(try parseBehaviour(node, did: form == "did", field: at(form), reader: reader))
        case "all_of", "any_of":
            let items = try reader.sequence(node, at(form), expected: "expected a list of operands")
            guard !items.isEmpty else { throw reader.error(at(form), "must list at least one operand") }
            let operands = try items.enumerated().map { index, item in
                let itemField = "\(at(form))[\(index)]"
                return try parseOperand(
                    try reader.object(item, itemField, allowed: Self.operandKeys), field: itemField, configuration: configuration, reader: reader)
            }
            return form == "all_of" ? .allOf(operands) : .anyOf(operands)
        case "not":
            let operand = try reader.object(node, at("not"), allowed: Self.operandKeys)
            return .not(try parseOperand(operand, field: at("not"), configuration: configuration, reader: reader))
        default:
            return .audience(try reader.nonEmptyString(node, at("audience")), field: at("audience"))
        }
    }

    /// `funnel: NAME` with `outcome: OUTCOME, step: K` (or `outcome: completed`), or `stalled: {step: K, for: 1h}`; `days: N`.
    private func parseStanding(
        _ fields: [String: Node], name nameNode: Node, field: String, configuration: FunnelConfiguration, reader: YAMLReader
    ) throws -> FunnelStanding {
        let at = { (key: String) in reader.join(field, key) }
        let name = try reader.nonEmptyString(nameNode, at("funnel"))
        guard let funnel = configuration.funnel(named: name) else {
            let known = configuration.funnels.map { "'\($0.name)'" }.joined(separator: ", ")
            throw reader.error(at("funnel"), "unknown funnel '\(name)' (funnels are \(known))")
        }
        var days: Int?
        if let node = fields["days"] {
            let value = try reader.number(node, at("days"))
            guard value >= 1, value <= 36_500, value == value.rounded() else {
                throw reader.error(at("days"), "expected a whole number of days, at least 1 (got \(value))")
            }
            days = Int(value)
        }
        let zone = configuration.timeZoneIdentifier(for: funnel)
        func step(_ node: Node?, _ stepField: String, as outcome: PersonCell.Outcome) throws -> Int {
            guard let node else { throw reader.error(stepField, "missing: the report's row, from 1") }
            let text = try reader.scalar(node, stepField)
            guard let step = Int(text) else { throw reader.error(stepField, "expected a step number from 1 (got '\(text)')") }
            do {
                _ = try PersonCell.parse("\(outcome.rawValue):\(step)", in: funnel)
            } catch {
                throw reader.error(stepField, "\(error)")
            }
            if outcome == .inProgress || outcome == .dropped, funnel.requiredStepIndices.last == step - 1 {
                throw reader.error(stepField, "step \(step) is the last required step: no one is stuck there")
            }
            return step
        }
        if let stalledNode = fields["stalled"] {
            if fields["outcome"] != nil { throw reader.error(at("outcome"), "cannot be combined with stalled (stalled is an outcome)") }
            if fields["step"] != nil { throw reader.error(at("step"), "goes inside stalled: {step: K, for: 1h}") }
            let stalled = try reader.object(stalledNode, at("stalled"), allowed: ["step", "for"])
            let row = try step(stalled["step"], at("stalled.step"), as: .inProgress)
            guard let forNode = stalled["for"] else { throw reader.error(at("stalled.for"), "missing: how long since their step (e.g. 1h)") }
            let text = try reader.scalar(forNode, at("stalled.for"))
            guard let seconds = WindowDuration.seconds(from: text), seconds > 0 else {
                throw reader.error(at("stalled.for"), "cannot parse '\(text)' (expected e.g. 30m, 1h, 2d or whole seconds)")
            }
            guard seconds < funnel.windowSeconds else {
                throw reader.error(
                    at("stalled.for"),
                    "\(text) is not shorter than the funnel's window (\(FunnelDefinition.duration(funnel.windowSeconds))): no one is still in progress by then")
            }
            return FunnelStanding(funnel: funnel, outcome: .stalled(seconds: seconds), step: row, days: days, timeZone: zone)
        }
        guard let outcomeNode = fields["outcome"] else {
            throw reader.error(at("outcome"), "missing: reached, converted, dropped, in_progress or completed (or stalled: {step, for})")
        }
        let text = try reader.scalar(outcomeNode, at("outcome"))
        if text == "completed" {
            if fields["step"] != nil { throw reader.error(at("step"), "completed takes no step (it is the funnel's last)") }
            return FunnelStanding(funnel: funnel, outcome: .completed, step: nil, days: days, timeZone: zone)
        }
        guard let outcome = PersonCell.Outcome(rawValue: text) else {
            throw reader.error(at("outcome"), "expected reached, converted, dropped, in_progress or completed (got '\(text)')")
        }
        return FunnelStanding(funnel: funnel, outcome: .cell(outcome), step: try step(fields["step"], at("step"), as: outcome), days: days, timeZone: zone)
    }

    /// `did: {event: NAME, where: {…}, times: N, within: 7d}` (or `screen`, or `any_of` matchers).
    private func parseBehaviour(_ node: Node, did: Bool, field: String, reader: YAMLReader) throws -> Behaviour {
        var fields = try reader.object(node, field, allowed: Self.behaviourKeys)
        var behaviour = Behaviour(did: did, matchers: [])
        if let node = fields.removeValue(forKey: "times") {
            let value = try reader.number(node, "\(field).times")
            guard value >= 1, value <= 1_000_000, value == value.rounded() else {
                throw reader.error("\(field).times", "expected a whole number, at least 1 (got \(value))")
            }
            behaviour.times = Int(value)
        }
        if let node = fields.removeValue(forKey: "within") {
            let text = try reader.scalar(node, "\(field).within")
            guard let seconds = WindowDuration.seconds(from: text), seconds > 0 else {
                throw reader.error("\(field).within", "cannot parse '\(text)' (expected e.g. 12h, 7d or whole seconds; leave it out for ever)")
            }
            behaviour.withinSeconds = seconds
        }
        if let anyOf = fields["any_of"] {
            for key in ["event", "screen", "where"] where fields[key] != nil {
                throw reader.error("\(field).\(key)", "cannot be combined with any_of (put it inside each alternative)")
            }
            let items = try reader.sequence(anyOf, "\(field).any_of", expected: "expected a list of matchers")
            guard !items.isEmpty else { throw reader.error("\(field).any_of", "must list at least one matcher") }
            behaviour.matchers = try items.enumerated().map { index, item in
                try parseMatcher(item, field: "\(field).any_of[\(index)]", reader: reader)
            }
        } else {
            behaviour.matchers = [try parseMatcherFields(fields, field: field, reader: reader)]
        }
        return behaviour
    }

    /// `deliver: {url, on, traits, backfill, secret_file, max_attempts}`.
    private func parseDelivery(_ node: Node, reader: YAMLReader) throws -> AudienceDelivery {
        let fields = try reader.object(node, "deliver", allowed: Self.deliverKeys)
        guard let urlNode = fields["url"] else { throw reader.error("deliver.url", "missing: where to send the changes") }
        let url = try reader.nonEmptyString(urlNode, "deliver.url")
        guard let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(), ["http", "https"].contains(scheme),
              let host = parts.host, !host.isEmpty else {
            throw reader.error("deliver.url", "expected an http:// or https:// URL with a host")
        }
        var delivery = AudienceDelivery(url: url)
        if let node = fields["on"] {
            let names = try reader.stringList(node, "deliver.on")
            var changes = Set<AudienceDelivery.Change>()
            for (index, name) in names.enumerated() {
                guard let change = AudienceDelivery.Change(rawValue: name) else {
                    throw reader.error("deliver.on[\(index)]", "expected enter or leave (got '\(name)')")
                }
                changes.insert(change)
            }
            guard !changes.isEmpty else { throw reader.error("deliver.on", "must list enter, leave or both") }
            delivery.on = changes
        }
        if let node = fields["traits"] { delivery.traits = try reader.stringList(node, "deliver.traits") }
        if let node = fields["backfill"] { delivery.backfill = try reader.bool(node, "deliver.backfill") }
        if let node = fields["secret_file"] { delivery.secretFile = try reader.nonEmptyString(node, "deliver.secret_file") }
        if let node = fields["max_attempts"] {
            let value = try reader.number(node, "deliver.max_attempts")
            guard value >= 1, value <= 1000, value == value.rounded() else {
                throw reader.error("deliver.max_attempts", "expected a whole number from 1 to 1000 (got \(value))")
            }
            delivery.maxAttempts = Int(value)
        }
        return delivery
    }

    /// `written` with every audience reference replaced by that audience's
    /// tree; `path` holds the audiences being resolved, to refuse a cycle.
    private func resolve(
        _ written: Written, of audience: String, path: [String], byName: [String: Entry], reader: YAMLReader
    ) throws -> AudienceCondition {
        switch written {
        case .funnel(let standing): return .funnel(standing)
        case .behaviour(let behaviour): return .behaviour(behaviour)
        case .allOf(let operands): return .allOf(try operands.map { try resolve($0, of: audience, path: path, byName: byName, reader: reader) })
        case .anyOf(let operands): return .anyOf(try operands.map { try resolve($0, of: audience, path: path, byName: byName, reader: reader) })
        case .not(let operand): return .not(try resolve(operand, of: audience, path: path, byName: byName, reader: reader))
        case .audience(let name, let field):
            guard let entry = byName[name] else {
                let known = byName.keys.sorted().map { "'\($0)'" }.joined(separator: ", ")
                throw reader.error(field, "unknown audience '\(name)' (audiences are \(known))")
            }
            guard !path.contains(name) else {
                throw reader.error(field, "audiences refer to each other in a cycle: \((path + [name]).joined(separator: " → "))")
            }
            return try resolve(entry.condition, of: audience, path: path + [name], byName: byName, reader: reader)
        }
    }

    /// The apps and units of the funnels `written` reads, through the audiences it names.
    private static func sources(_ written: Written, byName: [String: Entry], seen: Set<String>) -> (apps: [String], units: Set<Funnel.Aggregation>) {
        switch written {
        case .funnel(let standing): return ([standing.funnel.app], [standing.funnel.aggregateBy])
        case .behaviour: return ([], [])
        case .allOf(let operands), .anyOf(let operands):
            var apps: [String] = []
            var units = Set<Funnel.Aggregation>()
            for operand in operands {
                let (a, u) = sources(operand, byName: byName, seen: seen)
                apps += a.filter { !apps.contains($0) }
                units.formUnion(u)
            }
            return (apps, units)
        case .not(let operand): return sources(operand, byName: byName, seen: seen)
        case .audience(let name, _):
            guard let entry = byName[name], !seen.contains(name) else { return ([], []) }
            var (apps, units) = sources(entry.condition, byName: byName, seen: seen.union([name]))
            if let app = entry.app, !apps.contains(app) { apps.insert(app, at: 0) }
            if let unit = entry.aggregateBy { units.insert(unit) }
            return (apps, units)
        }
    }
}
