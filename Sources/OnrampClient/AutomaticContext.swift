public import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

/// The context every message carries without the app writing a line, as
/// Segment's analytics-swift fills it, so the default breakdowns
/// (`context.os.name`, `context.app.version`) work out of the box.
public struct ApplicationInfo: Sendable, Hashable {
    public var name: String?
    public var version: String?
    public var build: String?
    /// The bundle identifier.
    public var namespace: String?

    public init(name: String? = nil, version: String? = nil, build: String? = nil, namespace: String? = nil) {
        self.name = name
        self.version = version
        self.build = build
        self.namespace = namespace
    }

    /// From a bundle's Info.plist (the main bundle's in an app; mostly empty on Linux).
    public init(bundle: Bundle) {
        let info = bundle.infoDictionary ?? [:]
        name = (info["CFBundleDisplayName"] as? String) ?? (info["CFBundleName"] as? String)
        version = info["CFBundleShortVersionString"] as? String
        build = info["CFBundleVersion"] as? String
        namespace = bundle.bundleIdentifier
    }

    var json: [String: JSONValue] {
        var fields: [String: JSONValue] = [:]
        if let name { fields["name"] = .string(name) }
        if let version { fields["version"] = .string(version) }
        if let build { fields["build"] = .string(build) }
        if let namespace { fields["namespace"] = .string(namespace) }
        return fields
    }
}

enum AutomaticContext {
    /// `library`, `os`, `device`, `app`, `locale` and `timezone` for this process.
    static func collect(application: ApplicationInfo) -> [String: JSONValue] {
        var context: [String: JSONValue] = [
            "library": ["name": "onramp-swift", "version": .string(OnrampClient.version)],
            "os": ["name": .string(osName), "version": .string(osVersion)],
            "locale": .string(Locale.current.identifier(.bcp47)),
            "timezone": .string(TimeZone.current.identifier),
        ]
        var device: [String: JSONValue] = ["type": .string(deviceType)]
        if let model = hardwareModel { device["model"] = .string(model) }
        #if canImport(Darwin)
        device["manufacturer"] = "Apple"
        #endif
        context["device"] = .object(device)
        let app = application.json
        if !app.isEmpty { context["app"] = .object(app) }
        return context
    }

    static var osName: String {
        #if os(iOS) && targetEnvironment(macCatalyst)
        "macOS"
        #elseif os(iOS)
        "iOS"
        #elseif os(tvOS)
        "tvOS"
        #elseif os(watchOS)
        "watchOS"
        #elseif os(visionOS)
        "visionOS"
        #elseif os(macOS)
        "macOS"
        #elseif os(Linux)
        "Linux"
        #elseif os(Windows)
        "Windows"
        #else
        "unknown"
        #endif
    }

    /// Segment's `device.type`: the platform in lower case.
    static var deviceType: String { osName.lowercased() }

    /// `17.2` or `17.2.1`, as the system reports it.
    static var osVersion: String {
        let v = ProcessInfo.processInfo.operatingSystemVersion
        return "\(v.majorVersion).\(v.minorVersion)" + (v.patchVersion > 0 ? ".\(v.patchVersion)" : "")
    }

    /// The hardware model identifier (`iPhone15,2`, `Mac14,2`; the simulated
    /// device's in a simulator; the machine architecture on Linux).
    static var hardwareModel: String? {
        if let simulated = ProcessInfo.processInfo.environment["SIMULATOR_MODEL_IDENTIFIER"] { return simulated }
        #if os(macOS)
        var size = 0
        guard sysctlbyname("hw.model", nil, &size, nil, 0) == 0, size > 0 else { return nil }
        var bytes = [CChar](repeating: 0, count: size)
        guard sysctlbyname("hw.model", &bytes, &size, nil, 0) == 0 else { return nil }
        return String(cString: bytes)
        #else
        var name = utsname()
        uname(&name)
        let machine = withUnsafeBytes(of: name.machine) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        return machine.isEmpty ? nil : machine
        #endif
    }
}

extension [String: JSONValue] {
    /// This context with `overrides` laid over it, objects merged key by key:
    /// an app that sets `app.version` keeps the automatic `app.name`.
    func merging(overrides: [String: JSONValue]) -> [String: JSONValue] {
        var result = self
        for (key, value) in overrides {
            if case .object(let mine) = result[key], case .object(let theirs) = value {
                result[key] = .object(mine.merging(overrides: theirs))
            } else {
                result[key] = value
            }
        }
        return result
    }
}
