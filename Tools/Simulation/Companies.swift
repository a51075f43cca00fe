import Foundation
import OnrampClient

/// Ops' companies, as its apps name them in Segment `group` calls: a
/// creator who enters the company's details sets one up, named after the
/// device, and says so in a `group` call with the company's traits; an
/// employee who enters a company code joins one set up in the days before
/// (or, when none was, one set up before the history began) and says so in
/// a `group` call too. What the funnels counting companies read
/// (docs/funnels.md, "Counting groups").
///
/// Devices are drawn in no order of time, so the companies are gathered
/// first, from the founding calls a history sends, and the employees'
/// calls named after: an employee drawn before their company's creator
/// still joins it.
struct Companies: Sendable {
    /// How long after a company is set up an employee may join it.
    static let joiningSpan: TimeInterval = 3 * 86_400
    /// Companies set up before the history began, which employees join when none was set up in the span.
    static let earlier = 20

    /// When each company was set up (seconds since 1970) and its id, by time once `seal`ed.
    private var founded: [(at: TimeInterval, id: String)] = []

    init() {}

    /// The company a creator's journey sets up (the moment its details are entered), if it does.
    static func founding(_ journey: Journey, start: Date, device: String) -> (id: String, at: Date)? {
        guard journey.app == "ops", let details = journey.actions.first(where: { $0.kind == .screen && $0.name == "companyDetails" })
        else { return nil }
        return ("co-\(device)", start.addingTimeInterval(details.at + 1))
    }

    /// Whether a group call of `device` names the company it set up.
    static func isFounding(_ groupId: String, by device: String) -> Bool { groupId == "co-\(device)" }

    /// A company set up at `at`, as its founding call says.
    mutating func add(_ id: String, at: Date) {
        founded.append((at.timeIntervalSince1970, id))
    }

    /// Orders the companies by the time they were set up; after the last `add`.
    mutating func seal() {
        founded.sort { ($0.at, $0.id) < ($1.at, $1.id) }
    }

    /// `journey` with its `group` call, if it makes one; `draw` is the
    /// device's own number, which picks the company an employee joins.
    func withGroupCall(_ journey: Journey, start: Date, device: String, draw: UInt64) -> Journey {
        var journey = journey
        if let company = Self.founding(journey, start: start, device: device) {
            let size: JSONValue = draw % 10 < 6 ? "1-10" : (draw % 10 < 9 ? "11-50" : "51-200")
            journey.actions.append(Action(
                kind: .group, name: company.id, properties: ["name": .string("Company \(device)"), "size": size],
                at: company.at.timeIntervalSince(start)))
        } else if journey.app == "ops", let code = journey.actions.first(where: { $0.kind == .screen && $0.name == "codeEntry" }) {
            let at = start.addingTimeInterval(code.at + 1)
            journey.actions.append(Action(kind: .group, name: company(joinedAt: at, draw: draw), at: code.at + 1))
        }
        return journey
    }

    /// A company set up in the `joiningSpan` before `time`, picked by `draw`.
    private func company(joinedAt time: Date, draw: UInt64) -> String {
        let t = time.timeIntervalSince1970
        let from = index(of: t - Self.joiningSpan), to = index(of: t)
        guard to > from else { return "co-earlier-\(draw % UInt64(Self.earlier))" }
        return founded[from + Int(draw % UInt64(to - from))].id
    }

    /// The first company set up at or after `t`.
    private func index(of t: TimeInterval) -> Int {
        var low = 0, high = founded.count
        while low < high {
            let middle = (low + high) / 2
            if founded[middle].at < t { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// A device's own number for `withGroupCall`, apart from the draws of its journey.
    static func draw(seed: UInt64, device: Int) -> UInt64 {
        var rng = SeededRandom(seed: seed ^ (UInt64(truncatingIfNeeded: device) &* 0x9FB2_1C65_1E98_DF25) ^ 0x434F_4D50_414E_5953)
        return rng.next()
    }
}
