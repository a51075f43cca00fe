public import Foundation

/// The apps and funnels Onramp reports on, loaded from YAML.
///
/// The same file may carry sections for other parts of Onramp: unknown
/// top-level and app keys are ignored, while everything inside a funnel is
/// checked strictly because a typo there silently changes the numbers.
public struct FunnelConfiguration: Sendable, Hashable {
    /// The resource built into the module with the five shipped funnels.
    public static let defaultResourceName = "default-funnels"

    /// Global report time zone (IANA identifier), when configured.
    public var reportTimeZone: String?
    public var apps: [AppConfiguration]
    public var funnels: [Funnel]
    /// Standing sets of persons kept by the job (docs/audiences.md).
    public var audiences: [Audience]
    /// How long the log keeps events, and where older months go; nil: forever (docs/lifecycle.md).
    public var archive: ArchiveSettings?

    public init(
        reportTimeZone: String? = nil, apps: [AppConfiguration], funnels: [Funnel], audiences: [Audience] = [],
        archive: ArchiveSettings? = nil
    ) {
        self.reportTimeZone = reportTimeZone
        self.apps = apps
        self.funnels = funnels
        self.audiences = audiences
        self.archive = archive
    }

    /// The fewest days the log must keep so that no funnel's window and
    /// retention day reach past it: the longest window plus the last retention day, in whole days.
    public var leastDaysKept: Int {
        funnels.map { funnel in
            Int((funnel.windowSeconds + 86_399) / 86_400) + (funnel.retention.days.last ?? 0) + 1
        }.max() ?? 0
    }

    /// Every dotted attribute path any funnel reads; the caller extracts
    /// exactly these into `FunnelEvent.attributes`.
    public var referencedPaths: Set<String> {
        audiences.reduce(into: funnels.reduce(into: Set<String>()) { $0.formUnion($1.referencedPaths) }) { $0.formUnion($1.referencedPaths) }
    }

    public func app(named name: String) -> AppConfiguration? {
        apps.first { $0.name == name }
    }

    public func funnel(named name: String) -> Funnel? {
        funnels.first { $0.name == name }
    }

    public func funnels(forApp app: String) -> [Funnel] {
        funnels.filter { $0.app == app }
    }

    public func audience(named name: String) -> Audience? {
        audiences.first { $0.name == name }
    }

    public func audiences(forApp app: String) -> [Audience] {
        audiences.filter { $0.app == app }
    }

    /// The time zone a funnel's cohort days are cut in: the app's own
    /// `time_zone` if set, else the global `report_time_zone`, else UTC.
    /// A command-line `--time-zone` should override this in the caller.
    public func timeZoneIdentifier(for funnel: Funnel) -> String {
        app(named: funnel.app)?.timeZone ?? reportTimeZone ?? "UTC"
    }

    /// Parses configuration text; `source` names it in error messages.
    public static func parse(yaml: String, source: String) throws(ConfigurationError) -> FunnelConfiguration {
        try ConfigurationParser(source: source).parse(yaml: yaml)
    }

    /// Parses one funnel written as an entry of `funnels:`, with its `app`
    /// (`onramp funnel --definition`); `source` names it in error messages.
    public static func parseFunnel(yaml: String, source: String) throws(ConfigurationError) -> Funnel {
        try ConfigurationParser(source: source).parseFunnel(yaml: yaml)
    }

    /// Loads and validates a configuration file (`--config FILE`).
    public static func load(contentsOf url: URL) throws(ConfigurationError) -> FunnelConfiguration {
        let source = url.isFileURL ? url.relativePath : url.absoluteString
        let text: String
        do {
            text = try String(contentsOf: url, encoding: .utf8)
        } catch {
            throw ConfigurationError(source: source, message: "cannot read file (\(error.localizedDescription))")
        }
        return try parse(yaml: text, source: source)
    }

    /// The configuration built into the module (docs/funnels.md), from
    /// `Resources/default-funnels.yaml`.
    public static func `default`() throws(ConfigurationError) -> FunnelConfiguration {
        try parse(yaml: String(decoding: PackageResources.default_funnels_yaml, as: UTF8.self), source: "\(defaultResourceName).yaml")
    }
}
