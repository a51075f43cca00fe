import ArgumentParser
import Delivery
import Funnels

/// What the commands that deliver audiences' changes (`onramp audiences
/// run`, and `report` and `rebuild` after their run) share.
extension Deliverer {
    /// The configuration's deliverer; a delivering audience without its
    /// secret is refused as bad input, before the command writes anything.
    static func checked(_ configuration: FunnelConfiguration) throws -> Deliverer {
        do {
            return try Deliverer(configuration: configuration)
        } catch let error as Deliverer.SetupError {
            throw ValidationError(error.description)
        }
    }
}

extension Deliverer.Summary {
    /// `delivered: N, failed: N, dead-lettered: N` and the last error, as the commands print it.
    var line: String {
        "delivered: \(delivered), failed: \(failed), dead-lettered: \(dead)" + (lastError.map { " (last: \($0))" } ?? "")
    }
}
