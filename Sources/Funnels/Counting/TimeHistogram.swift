/// Completers' times to convert in bins with readable edges (10 s, 1 m,
/// 1 h…), the distribution an analyst reads next to the median: bins are
/// fixed, so two queries' histograms line up.
public enum TimeHistogram {
    public struct Bin: Sendable, Hashable {
        /// Seconds, lower bound included, upper excluded (nil: open-ended).
        public var from: Double
        public var to: Double?
        public var persons: Int
    }

    static let edges: [Double] = [0, 10, 30, 60, 120, 300, 600, 1_800, 3_600, 7_200, 21_600, 43_200, 86_400, 172_800, 604_800]

    /// The bins from 0 up to the last edge below the window, and one open bin after it.
    public static func bins(_ seconds: [Double], windowSeconds: Int64) -> [Bin] {
        let window = Double(windowSeconds)
        var edges = Self.edges.filter { $0 < window }
        if edges.isEmpty { edges = [0] }
        var bins = edges.indices.map { i in Bin(from: edges[i], to: i + 1 < edges.count ? edges[i + 1] : nil, persons: 0) }
        for value in seconds {
            let index = (edges.lastIndex { $0 <= value }) ?? 0
            bins[index].persons += 1
        }
        return bins
    }
}
