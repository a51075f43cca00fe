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
    // The SDK (OnrampClient) uses iOS 16-generation APIs (Duration, Task.sleep(for:),
    // Locale's BCP 47 identifier), so apps on iOS 16, tvOS 16, watchOS 9 and visionOS
    // can add it; macOS 15 is what the server's targets need.
    platforms: [.macOS(.v15), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    // What others may depend on: the product an operator runs, the tooling
    // beside it, and the client SDK. The modules behind them are not API.
    products: [
        .executable(name: "onramp", targets: ["onramp"]),
        .executable(name: "onramp-bench", targets: ["onramp-bench"]),
        .library(name: "OnrampClient", targets: ["OnrampClient"]),
        // For the fuzz package (fuzz/) only; underscored: not API.
        .library(name: "_OnrampEventLog", targets: ["EventLog"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // Tests only: a client that trusts the proxy test's self-signed certificate.
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
    ],
    // From the bottom layer up (docs/architecture.md): PostgreSQL access, the engine and the log,
    // reading the log, the job and query time side by side, the servers and renderers, the CLI;
    // then the tooling under Tools/, then the tests.
    targets: [
        // The C library, seen only by LibPQ.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        // zlib, seen only by DataLifecycle: the archive's gzip files.
        .systemLibrary(name: "CZlib", providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]),
        // Gregorian dates as day counts and back: the one copy, for LibPQ and Funnels.
        .target(name: "CivilDate", swiftSettings: strictness),
        // The one way into PostgreSQL: connections, typed rows, COPY, a pool.
        .target(
            name: "LibPQ",
            dependencies: [
                "CLibPQ", "CivilDate",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),
        // Applies sql/migrations in order, with checksums.
        .target(
            name: "Migrations",
            dependencies: ["LibPQ"],
            swiftSettings: strictness
        ),
        // Who reads which apps (docs/access.md): the owner's grants, which the `analytics` views apply.
        .target(
            name: "Access",
            dependencies: ["LibPQ"],
            swiftSettings: strictness
        ),
        // The funnel engine, its configuration, analyses and findings: pure Swift, no SQL, no HTTP.
        .target(
            name: "Funnels",
            dependencies: ["CivilDate", .product(name: "Yams", package: "Yams")],
            // In the binary itself: `onramp` runs without a resource bundle
            // beside it, and a run does not look for one.
            resources: [.embedInCode("Resources/default-funnels.yaml")],
            swiftSettings: strictness
        ),
        // The event log: Segment messages, validation, PII, ids, write keys, quarantine, the exactly-once append.
        .target(
            name: "EventLog",
            dependencies: [
                "LibPQ",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strictness
        ),
        // Reading the log, for the job and query time: the transaction-id checkpoint and window, scopes, COPY reads, the work beside them.
        .target(
            name: "LogReading",
            dependencies: [
                "LibPQ", "EventLog", "Funnels",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictness
        ),
        // The nightly job: identity links, recompute touched persons, store per-person rows and report tables.
        .target(
            name: "Projection",
            dependencies: [
                "LibPQ", "Funnels", "EventLog", "LogReading", .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strictness
        ),
        // Erasure on request and suppression (docs/privacy.md): the log's privileged path, then the job over the persons erased.
        .target(
            name: "Privacy",
            dependencies: ["LibPQ", "Projection", .product(name: "NIOConcurrencyHelpers", package: "swift-nio")],
            swiftSettings: strictness
        ),
        // The log's life: an app's messages exported, old months archived to gzip files and restored.
        .target(
            name: "DataLifecycle",
            dependencies: [
                "LibPQ", "EventLog", "LogReading", "CZlib", "CivilDate", .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictness
        ),
        // Any funnel at query time, from the log's columns kept on local disk; knows nothing of the job.
        .target(
            name: "Explore",
            dependencies: ["LibPQ", "Funnels", "EventLog", "LogReading", .product(name: "NIOConcurrencyHelpers", package: "swift-nio")],
            swiftSettings: strictness
        ),
        // `onramp serve`: the Hummingbird application, routes, auth, limits, group commit, metrics.
        .target(
            name: "IngestServer",
            dependencies: [
                "EventLog", "LibPQ", "Migrations", "Funnels",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strictness
        ),
        // `onramp explore`: the explorer's page and the API it polls, over Explore.
        .target(
            name: "ExploreServer",
            dependencies: [
                "Explore", "Funnels", "LibPQ", "Reports", "CivilDate",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            resources: [.embedInCode("Resources/explore.html")],
            swiftSettings: strictness
        ),
        // Renders funnel reports: terminal table, markdown, csv, json.
        .target(
            name: "Reports",
            dependencies: ["Funnels"],
            swiftSettings: strictness
        ),
        // Delivers the report's alert message to a webhook, with retries, and signed posts of audiences' changes.
        .target(
            name: "Notifications",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strictness
        ),
        // Sends audiences' changes to the team's tools: the ledger the job fills, signed batches, retries.
        .target(
            name: "Delivery",
            dependencies: [
                "LibPQ", "Funnels", "LogReading", "Notifications",
            ],
            swiftSettings: strictness
        ),
        // The client SDK for apps: Foundation only, Segment's wire format.
        .target(name: "OnrampClient", swiftSettings: strictness),
        // The CLI an operator runs: one small file per subcommand.
        .executableTarget(
            name: "onramp",
            dependencies: [
                "LibPQ", "Migrations", "LocalPostgres", "Funnels", "Projection", "Explore", "ExploreServer", "Reports", "Simulation",
                "EventLog", "IngestServer", "Notifications", "Delivery", "Privacy", "Access", "DataLifecycle", "LogReading",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),
        // Tooling (Tools/), which the product's modules never import; the CLI links two for `demo` and `simulate`.
        // A private, throwaway PostgreSQL cluster for tests, the demo and benchmarks.
        .target(
            name: "LocalPostgres",
            dependencies: ["LibPQ", "Migrations", .product(name: "NIOConcurrencyHelpers", package: "swift-nio")],
            path: "Tools/LocalPostgres",
            swiftSettings: strictness
        ),
        // `onramp simulate`: devices walking the five flows, sending through OnrampClient.
        .target(name: "Simulation", dependencies: ["OnrampClient"], path: "Tools/Simulation", swiftSettings: strictness),
        // `onramp-bench`'s benchmarks, in ratios; it runs the real server in-process (Hummingbird).
        .target(
            name: "Benchmarks",
            dependencies: [
                "Access", "LibPQ", "LocalPostgres", "Migrations", "Funnels", "Simulation", "OnrampClient", "EventLog", "IngestServer",
                "DataLifecycle",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tools/Benchmarks",
            swiftSettings: strictness
        ),
        // A stand-in app process for the SDK's kill tests.
        .executableTarget(name: "onramp-client-probe", dependencies: ["OnrampClient"], path: "Tools/ClientProbe", swiftSettings: strictness),
        // Helpers shared by the test targets (running the built CLI).
        .target(
            name: "TestSupport",
            dependencies: [
                "LibPQ", "LocalPostgres", "Funnels",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tools/TestSupport",
            swiftSettings: strictness
        ),
        // `onramp-bench`: the benchmarks and the fault suite's client; tooling the product does not link.
        .executableTarget(
            name: "onramp-bench",
            dependencies: ["Benchmarks", "IngestServer", "Migrations", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Tools/OnrampBench",
            swiftSettings: strictness
        ),
        // The tests, a target per area; LogReading's are with the job's, whose runs they drive.
        .testTarget(
            name: "FunnelsTests",
            dependencies: ["Funnels", "TestSupport"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "PrivacyTests",
            dependencies: [
                "Privacy", "Projection", "EventLog", "Funnels", "LibPQ", "LocalPostgres", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "EventLogTests",
            dependencies: ["EventLog", "LibPQ", "LocalPostgres", "TestSupport"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "IngestServerTests",
            dependencies: [
                "EventLog", "IngestServer", "LibPQ", "LocalPostgres", "Migrations", "TestSupport",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "OnrampClientTests",
            dependencies: [
                "OnrampClient", "EventLog", "IngestServer", "LibPQ", "LocalPostgres", "Migrations", "TestSupport", "onramp-client-probe",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "CLITests",
            dependencies: ["LibPQ", "LocalPostgres", "TestSupport", "Funnels", "onramp"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "ProjectionTests",
            dependencies: [
                "LibPQ", "LocalPostgres", "Funnels", "LogReading", "Projection", "Explore", "Reports", "TestSupport", "Simulation", "OnrampClient",
                "onramp", "Benchmarks",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "DeliveryTests",
            dependencies: [
                "Delivery", "Privacy", "Projection", "Funnels", "LibPQ", "LocalPostgres", "TestSupport",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "ExploreTests",
            dependencies: ["Access", "LibPQ", "LocalPostgres", "Funnels", "LogReading", "Projection", "Explore", "TestSupport", "onramp"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "ExploreServerTests",
            dependencies: [
                "ExploreServer", "Funnels", "LibPQ", "LocalPostgres", "TestSupport", "onramp",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "AccessTests",
            dependencies: ["Access", "LibPQ", "LocalPostgres", "TestSupport"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "AnalyticsTests",
            dependencies: ["Access", "LibPQ", "LocalPostgres", "Migrations", "Funnels", "Projection", "TestSupport"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "ReportsTests",
            dependencies: ["Funnels", "Reports", "TestSupport"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "LibPQTests",
            dependencies: [
                "CivilDate", "LibPQ", "LocalPostgres",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "MigrationsTests",
            dependencies: ["LibPQ", "Migrations", "LocalPostgres", "TestSupport", "onramp"],
            swiftSettings: strictness
        ),
    ]
)
