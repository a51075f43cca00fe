import Foundation

/// SplitMix64: small, fast and seedable, so `--seed S` reproduces a run.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `p`.
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }

    /// A log-normal gap in seconds around `median`: most people are quick, a few take long.
    mutating func gap(median: Double) -> Double {
        let u = Double.random(in: 0.0001..<1, using: &self)
        let v = Double.random(in: 0.0001..<1, using: &self)
        let normal = (-2 * log(u)).squareRoot() * cos(2 * Double.pi * v)
        return max(1, median * exp(0.8 * normal))
    }

    mutating func pick<T>(_ options: [(T, Double)]) -> T {
        let total = options.reduce(0) { $0 + $1.1 }
        var x = Double.random(in: 0..<total, using: &self)
        for (value, weight) in options {
            if x < weight { return value }
            x -= weight
        }
        return options[options.count - 1].0
    }
}
