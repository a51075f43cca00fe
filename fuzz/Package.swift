// swift-tools-version: 6.1
// The libFuzzer target for the message decoder and validator; see README.md.
// A package of its own so its `-sanitize=fuzzer` build never touches the main build.
import Foundation
import PackageDescription

/// A path dependency's identity is its directory's name: whatever the checkout is called.
let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent.lowercased()

let package = Package(
    name: "onramp-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "..")],
    targets: [
        .executableTarget(
            name: "FuzzMessages",
            dependencies: [.product(name: "_OnrampEventLog", package: repository)],
            swiftSettings: [
                .enableUpcomingFeature("InternalImportsByDefault"),
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
            ]
        )
    ]
)
