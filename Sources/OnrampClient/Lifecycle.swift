import Foundation

/// Segment's application lifecycle events. At start-up, against the version
/// and build the previous launch stored: `Application Installed` (none stored)
/// or `Application Updated` (another one, with `previous_version` and
/// `previous_build`), then `Application Opened`. While running, where UIKit or
/// AppKit post their notifications: `Application Backgrounded` (and a flush)
/// when the app leaves the foreground, `Application Opened` with
/// `from_background: true` when it comes back.
enum Lifecycle {
    /// What the previous launch stored, in the client's directory.
    struct Record: Codable, Equatable {
        var version: String?
        var build: String?
    }

    /// The launch's events, in order.
    static func launchEvents(previous: Record?, current: Record) -> [(name: String, properties: [String: JSONValue])] {
        var events: [(String, [String: JSONValue])] = []
        let now = properties(current)
        if let previous {
            if previous != current {
                var updated = now
                updated["previous_version"] = previous.version.map(JSONValue.string) ?? .null
                updated["previous_build"] = previous.build.map(JSONValue.string) ?? .null
                events.append(("Application Updated", updated))
            }
        } else {
            events.append(("Application Installed", now))
        }
        var opened = now
        opened["from_background"] = false
        events.append(("Application Opened", opened))
        return events
    }

    static func properties(_ record: Record) -> [String: JSONValue] {
        ["version": record.version.map(JSONValue.string) ?? .null, "build": record.build.map(JSONValue.string) ?? .null]
    }

    static func load(_ file: URL) -> Record? {
        guard let data = try? Data(contentsOf: file) else { return nil }
        return try? JSONDecoder().decode(Record.self, from: data)
    }

    static func store(_ record: Record, _ file: URL) {
        guard let data = try? JSONEncoder().encode(record) else { return }
        try? data.write(to: file, options: [.atomic])
    }

    /// The platform's notifications for leaving and re-entering the
    /// foreground, by their stable raw names, so no UI framework is imported
    /// (and nothing here is tied to the main actor). None exist on Linux.
    static var notifications: (background: Notification.Name, foreground: Notification.Name)? {
        #if canImport(UIKit)
        (Notification.Name("UIApplicationDidEnterBackgroundNotification"), Notification.Name("UIApplicationWillEnterForegroundNotification"))
        #elseif canImport(AppKit)
        (Notification.Name("NSApplicationDidResignActiveNotification"), Notification.Name("NSApplicationDidBecomeActiveNotification"))
        #else
        nil
        #endif
    }
}

/// A notification observer's token, kept only to remove the observer.
struct ObserverToken: @unchecked Sendable {
    // NSObjectProtocol is not Sendable; the token is never used except to hand it back to NotificationCenter.
    let token: any NSObjectProtocol
}
