import Foundation

/// The client's on-disk queue: one file per message, written atomically
/// (temp file + rename) before `track` returns, deleted only after the server
/// answered for it. An app killed between any two calls loses nothing; a
/// message whose answer was lost is sent again with the same `messageId`,
/// which the server counts as a duplicate instead of storing it twice.
final class DiskQueue: Sendable {
    let directory: URL
    private let maxCount: Int
    private let state: Locked<State>

    private struct State {
        var files: [URL]
        var nextSequence: UInt64
        var dropped: Int
    }

    init(directory: URL, maxCount: Int) throws {
        self.directory = directory
        self.maxCount = max(1, maxCount)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let existing = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "json" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        let last = existing.last.flatMap { UInt64($0.lastPathComponent.prefix(20)) } ?? 0
        state = Locked(State(files: existing, nextSequence: last + 1, dropped: 0))
    }

    var count: Int { state.withLock { $0.files.count } }
    /// Messages dropped because the queue was full (oldest first).
    var dropped: Int { state.withLock { $0.dropped } }

    /// Persists a message; when the queue is full the oldest message is dropped.
    ///
    /// The file is written (atomically) *before* it joins the list, so a flush
    /// running at the same moment never sees a listed file that is not there yet.
    func append(_ message: Message) throws {
        let data = try JSONEncoder().encode(message)
        let file = state.withLock { s -> URL in
            defer { s.nextSequence += 1 }
            return directory.appendingPathComponent(String(format: "%020llu", s.nextSequence) + ".json")
        }
        try data.write(to: file, options: [.atomic])
        let evicted = state.withLock { s -> [URL] in
            // Names are zero-padded sequence numbers: keep the list in order even if two appends raced.
            let position = s.files.lastIndex { $0.lastPathComponent < file.lastPathComponent }.map { $0 + 1 } ?? 0
            s.files.insert(file, at: position)
            var evicted: [URL] = []
            while s.files.count > maxCount {
                evicted.append(s.files.removeFirst())
                s.dropped += 1
            }
            return evicted
        }
        for old in evicted { try? FileManager.default.removeItem(at: old) }
    }

    /// The oldest messages, up to `limit`, with their files.
    func peek(_ limit: Int) -> [(URL, Message)] {
        let files = state.withLock { Array($0.files.prefix(limit)) }
        return files.compactMap { file in
            guard let data = try? Data(contentsOf: file) else {
                // Already gone (delivered by a flush that raced this one): forget it.
                state.withLock { $0.files.removeAll { $0 == file } }
                return nil
            }
            guard let message = try? JSONDecoder().decode(Message.self, from: data) else {
                remove([file])  // corrupt: it can never be sent
                return nil
            }
            return (file, message)
        }
    }

    func remove(_ files: [URL]) {
        let set = Set(files)
        state.withLock { $0.files.removeAll { set.contains($0) } }
        for file in files { try? FileManager.default.removeItem(at: file) }
    }
}
