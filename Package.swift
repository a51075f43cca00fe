// swift-tools-version: 6.1
import PackageDescription

/// Upcoming features every target builds with: imports stay internal unless a
/// module deliberately re-exports, existentials are spelled `any`.
let strictness: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "onramp",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "onramp", targets: ["onramp"]),
        .library(name: "LibPQ", targets: ["LibPQ"]),
        .library(name: "Migrations", targets: ["Migrations"]),
        .library(name: "LocalPostgres", targets: ["LocalPostgres"]),
        .library(name: "Funnels", targets: ["Funnels"]),
        .library(name: "OnrampClient", targets: ["OnrampClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
    ],
    targets: [
        // The C library, seen only by LibPQ.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        // The one way into PostgreSQL: connections, typed rows, COPY, a pool.
        .target(
            name: "LibPQ",
            dependencies: [
                "CLibPQ",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),
        // Applies sql/migrations in order, with checksums.
        .target(
            name: "Migrations",
            dependencies: ["LibPQ", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strictness
        ),
        // A private, throwaway PostgreSQL cluster for tests, the demo and benchmarks.
        .target(
            name: "LocalPostgres",
            dependencies: ["LibPQ", "Migrations"],
            swiftSettings: strictness
        ),
        // The funnel engine: configuration, windowFunnel, statistics. Pure Swift, no I/O
        // beyond reading its YAML configuration; knows nothing of SQL or HTTP.
        .target(
            name: "Funnels",
            dependencies: [.product(name: "Yams", package: "Yams")],
            resources: [.process("Resources")],
            swiftSettings: strictness
        ),
        // The nightly job: checkpoint, identity links, recompute touched persons, report tables.
        .target(
            name: "Projection",
            dependencies: ["LibPQ", "Funnels"],
            swiftSettings: strictness
        ),
        // Renders funnel reports: terminal table, markdown, csv, json.
        .target(
            name: "Reports",
            dependencies: ["Funnels"],
            swiftSettings: strictness
        ),
        // The client SDK for apps: Foundation only, Segment's wire format.
        .target(name: "OnrampClient", swiftSettings: strictness),
        // `onramp simulate`: devices walking the five flows, sending through OnrampClient.
        .target(name: "Simulation", dependencies: ["OnrampClient"], swiftSettings: strictness),
        // `onramp bench`: measured against this machine's own limits, in ratios.
        .target(
            name: "Benchmarks",
            dependencies: ["LibPQ", "LocalPostgres", "Migrations", "Simulation"],
            swiftSettings: strictness
        ),
        // Helpers shared by the test targets (running the built CLI).
        .target(name: "TestSupport", dependencies: ["LibPQ", "Funnels"], swiftSettings: strictness),
        // The CLI: one small file per subcommand.
        .executableTarget(
            name: "onramp",
            dependencies: [
                "LibPQ", "Migrations", "LocalPostgres", "Funnels", "Projection", "Reports", "Simulation", "Benchmarks",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "FunnelsTests",
            dependencies: ["Funnels"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "ProjectionTests",
            dependencies: ["LibPQ", "LocalPostgres", "Funnels", "Projection", "TestSupport", "onramp"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "AnalyticsTests",
            dependencies: ["LibPQ", "LocalPostgres", "Funnels", "Projection", "TestSupport"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "ReportsTests",
            dependencies: ["Funnels", "Reports"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "LibPQTests",
            dependencies: ["LibPQ", "LocalPostgres"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "MigrationsTests",
            dependencies: ["LibPQ", "Migrations", "LocalPostgres", "TestSupport", "onramp"],
            swiftSettings: strictness
        ),
    ]
)
