public import Funnels

/// The output formats of `onramp report`.
public enum ReportFormat: String, Sendable, CaseIterable {
    case table, markdown, csv, json

    /// File name used by `--out DIR`.
    public var fileName: String {
        switch self {
        case .table: "report.txt"
        case .markdown: "report.md"
        case .csv: "report.csv"
        case .json: "report.json"
        }
    }

    public func render(_ reports: [FunnelReport], range: ReportRange) -> String {
        switch self {
        case .table: TableRenderer(colors: false).render(reports, range: range)
        case .markdown: MarkdownRenderer().render(reports, range: range)
        case .csv: CSVRenderer().render(reports)
        case .json: JSONReport.render(reports, range: range)
        }
    }
}

/// The cohort days a report covers (nil: open-ended) and when it was made.
public struct ReportRange: Sendable {
    public var from: String?
    public var to: String?
    public var generatedAt: String

    public init(from: String?, to: String?, generatedAt: String) {
        self.from = from
        self.to = to
        self.generatedAt = generatedAt
    }

    var label: String { "cohorts \(from ?? "first")…\(to ?? "last")" }
}
