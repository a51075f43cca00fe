// A stand-in app process for the SDK's kill tests: tracks events through
// OnrampClient and prints each messageId once `track` has returned (so the
// message is on disk), flushing in the background as an app would, until it
// is killed. Each line also says how many the background flushes delivered.
//
//   onramp-client-probe SERVER_URL WRITE_KEY STORAGE_DIR COUNT
import Foundation
import OnrampClient

let arguments = CommandLine.arguments
guard arguments.count == 5, let server = URL(string: arguments[1]), let count = Int(arguments[4]) else {
    FileHandle.standardError.write(Data("usage: onramp-client-probe SERVER_URL WRITE_KEY STORAGE_DIR COUNT\n".utf8))
    exit(2)
}
var configuration = OnrampClient.Configuration(writeKey: arguments[2], host: server)
configuration.storageDirectory = URL(fileURLWithPath: arguments[3])
configuration.flushAt = 25
configuration.flushInterval = .milliseconds(50)
configuration.log = { _ in }
configuration.trackApplicationLifecycleEvents = false  // the ledger counts only its own events
let client = try OnrampClient(configuration: configuration)
for i in 0..<count {
    client.track("probe_event", properties: ["n": .number(Double(i))])
    // The message is persisted once track returns; only now does the ledger count it.
    let queued = try FileManager.default.contentsOfDirectory(atPath: arguments[3] + "/queue").count
    let delivered = client.statistics.delivered
    FileHandle.standardOutput.write(Data("tracked \(i) queued \(queued) delivered \(delivered)\n".utf8))
    try await Task.sleep(for: .milliseconds(2))
}
await client.flush()
FileHandle.standardOutput.write(Data("done\n".utf8))
