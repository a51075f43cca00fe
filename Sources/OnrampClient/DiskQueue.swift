import Foundation

/// The client's queue: one file per message, written atomically (temp file +
/// rename) before `track` returns, deleted only after the server answered for
/// it. An app killed between any two calls loses nothing; a message whose
/// answer was lost is sent again with the same `messageId`, which the server
/// counts as a duplicate instead of storing it twice.
///
/// It never stalls on its own files, the failures other SDKs' queues have had:
/// - a file that cannot be read or decoded (half-written, garbage, not a file)
///   is *set aside* into `set-aside/`, counted and logged, and the rest is sent;
/// - a write that fails (a full disk, a read-only directory, a locked device's
///   data protection) keeps the message in memory, in order, and the write is
///   tried again on the next `append` and before each delivery; a message still
///   only in memory is delivered from there;
/// - a delivered message whose file cannot be deleted is forgotten all the same
///   (sent again after a relaunch, it is a duplicate the server drops).
final class DiskQueue: Sendable {
    let directory: URL
    private let maxCount: Int
    private let log: @Sendable (String) -> Void
    private let state: Locked<State>

    /// A queued message: where it is, and its place in line.
    struct Entry: Sendable, Hashable {
        let sequence: UInt64
        /// nil while the message is only in memory.
        var file: URL?
        var pending: Message?
    }

    private struct State {
        var entries: [Entry]
        var nextSequence: UInt64
        var dropped = 0
        var setAside = 0
        /// Whether the last write failed: logged once per run of failures.
        var writesFailing = false
    }

    init(directory: URL, maxCount: Int, log: @escaping @Sendable (String) -> Void = { _ in }) throws {
        self.directory = directory
        self.maxCount = max(1, maxCount)
        self.log = log
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var entries: [Entry] = []
        var foreign: [URL] = []
        for file in try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil) where file.pathExtension == "json" {
            if let sequence = UInt64(file.deletingPathExtension().lastPathComponent) {
                entries.append(Entry(sequence: sequence, file: file))
            } else {
                foreign.append(file)
            }
        }
        entries.sort { $0.sequence < $1.sequence }
        // A name that is not a sequence number is still sent, after the others.
        var next = (entries.last?.sequence ?? 0) + 1
        for file in foreign.sorted(by: { $0.lastPathComponent < $1.lastPathComponent }) {
            entries.append(Entry(sequence: next, file: file))
            next += 1
        }
        state = Locked(State(entries: entries, nextSequence: next))
    }

    var count: Int { state.withLock { $0.entries.count } }
    /// Messages dropped because the queue was full (oldest first).
    var dropped: Int { state.withLock { $0.dropped } }
    /// Files that could not be read or decoded, moved out of the way.
    var setAside: Int { state.withLock { $0.setAside } }
    /// Messages whose write failed, held in memory until a write succeeds.
    var inMemory: Int { state.withLock { $0.entries.filter { $0.file == nil }.count } }

    /// Queues a message: on disk when the write succeeds, in memory when it does
    /// not. When the queue is full the oldest message is dropped.
    func append(_ message: Message) {
        let sequence = state.withLock { s -> UInt64 in
            defer { s.nextSequence += 1 }
            return s.nextSequence
        }
        // Written before it joins the list, so a flush running at the same moment never sees a listed file that is not there yet.
        let file = write(message, sequence: sequence)
        let evicted = state.withLock { s -> [Entry] in
            let entry = Entry(sequence: sequence, file: file, pending: file == nil ? message : nil)
            // Keep the list in sequence order even if two appends raced.
            let position = s.entries.lastIndex { $0.sequence < sequence }.map { $0 + 1 } ?? 0
            s.entries.insert(entry, at: position)
            var evicted: [Entry] = []
            while s.entries.count > maxCount {
                evicted.append(s.entries.removeFirst())
                s.dropped += 1
            }
            return evicted
        }
        for old in evicted { if let file = old.file { try? FileManager.default.removeItem(at: file) } }
        if file != nil { persistPending() }
    }

    /// The oldest messages, up to `limit`, with their entries. Messages held in
    /// memory are written first if they can be; unreadable files are set aside.
    func peek(_ limit: Int) -> [(Entry, Message)] {
        persistPending()
        var result: [(Entry, Message)] = []
        while result.count < limit {
            let window = state.withLock { s in Array(s.entries.dropFirst(result.count).prefix(limit - result.count)) }
            guard !window.isEmpty else { break }
            for entry in window {
                if let message = entry.pending {
                    result.append((entry, message))
                } else if let file = entry.file, let message = read(file, entry: entry) {
                    result.append((entry, message))
                }
            }
        }
        return result
    }

    /// Forgets delivered (or refused) messages and deletes their files.
    /// (Sequence numbers are unique: foreign file names get their own at start-up.)
    func remove(_ entries: [Entry]) {
        let sequences = Set(entries.map(\.sequence))
        let files = state.withLock { s -> [URL] in
            let gone = s.entries.filter { sequences.contains($0.sequence) }
            s.entries.removeAll { sequences.contains($0.sequence) }
            return gone.compactMap(\.file)
        }
        for file in files { try? FileManager.default.removeItem(at: file) }
    }

    // MARK: Files

    private func fileURL(_ sequence: UInt64) -> URL {
        directory.appendingPathComponent(String(format: "%020llu", sequence) + ".json")
    }

    /// The message's file, or nil when it could not be written.
    private func write(_ message: Message, sequence: UInt64) -> URL? {
        let file = fileURL(sequence)
        do {
            try JSONEncoder().encode(message).write(to: file, options: [.atomic])
            state.withLock { $0.writesFailing = false }
            return file
        } catch {
            let first = state.withLock { s -> Bool in
                defer { s.writesFailing = true }
                return !s.writesFailing
            }
            if first { log("could not write a queued message (\(error.localizedDescription)); keeping messages in memory and trying again") }
            return nil
        }
    }

    /// Writes the messages held in memory, oldest first, stopping at the first failure.
    private func persistPending() {
        let pending = state.withLock { s in s.entries.filter { $0.pending != nil } }
        for entry in pending {
            guard let message = entry.pending, let file = write(message, sequence: entry.sequence) else { return }
            let kept = state.withLock { s -> Bool in
                guard let i = s.entries.firstIndex(where: { $0.sequence == entry.sequence }) else { return false }
                s.entries[i].file = file
                s.entries[i].pending = nil
                return true
            }
            // Delivered while it was being written: the file is not needed.
            if !kept { try? FileManager.default.removeItem(at: file) }
        }
    }

    /// The message in `file`; nil when the file is gone (another flush
    /// delivered it) or was set aside because it cannot be read or decoded.
    private func read(_ file: URL, entry: Entry) -> Message? {
        do {
            let data = try Data(contentsOf: file)
            return try JSONDecoder().decode(Message.self, from: data)
        } catch {
            let exists = FileManager.default.fileExists(atPath: file.path)
            state.withLock { s in
                s.entries.removeAll { $0.sequence == entry.sequence }
                if exists { s.setAside += 1 }
            }
            guard exists else { return nil }
            setAside(file, because: error)
            return nil
        }
    }

    /// Moves an unusable file into `set-aside/`, so it is kept for a look but never blocks the queue again.
    private func setAside(_ file: URL, because error: any Error) {
        var isDirectory: ObjCBool = false
        let why = FileManager.default.fileExists(atPath: file.path, isDirectory: &isDirectory) && isDirectory.boolValue
            ? "it is a directory, not a file"
            : error is DecodingError ? "it is not a whole message" : error.localizedDescription
        let aside = directory.appendingPathComponent("set-aside")
        let target = aside.appendingPathComponent(file.lastPathComponent + "." + UUID().uuidString.prefix(8))
        let moved = (try? FileManager.default.createDirectory(at: aside, withIntermediateDirectories: true)) != nil
            && (try? FileManager.default.moveItem(at: file, to: target)) != nil
        log("set aside the unreadable queue file \(file.lastPathComponent) (\(why))"
            + (moved ? "; it is in \(aside.lastPathComponent)/" : "; it could not be moved, and is skipped until the app restarts"))
    }
}
