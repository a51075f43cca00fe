import EventLog
import Foundation

/// libFuzzer's entry point: one request body through everything the server
/// does with it before the database, in the order the server does it.
///
/// The JSON parser against JSONDecoder, both decoders (a batch, and a single
/// `/v1/track` message), then the validator with a PII policy that exercises
/// hashing and removal. Findings are
/// crashes, traps (overflow, out-of-range index, force-unwrap) and hangs; the
/// checks below also trap when an outcome breaks the validator's contract.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMessages(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let body = Data(bytes: start, count: count)
    // The request-body parser against JSONDecoder, the reference it replaced: when
    // both accept, the same value. (We refuse more: trailing commas, nesting
    // beyond 256, bad text under a repeated key, which JSONDecoder never reads.)
    if let ours = try? JSONParser.parse(body), let reference = try? JSONDecoder().decode(JSONValue.self, from: body) {
        precondition(ours.canonicalText == reference.canonicalText, "JSONParser and JSONDecoder disagree")
    }
    var policy = IngestPolicy()
    policy.pii["yoked"] = PIIPolicy(properties: ["phone", "email"], mode: .hash)
    let receivedAt: Int64 = 1_767_225_600_000_000  // fixed: runs must be reproducible
    for decode in [{ try BatchDecoder.decodeBatch(body) }, { try BatchDecoder.decodeSingle(body, type: .track) }] {
        guard let batch = try? decode() else { continue }
        for app in ["yoked", "ops"] {
            let outcome = MessageValidator.validate(batch, app: app, receivedAt: receivedAt, policy: policy)
            // Every message is either an event or a rejection, exactly once, in order.
            precondition(outcome.events.count + outcome.rejections.count == batch.messages.count)
            let indices = (outcome.events.map(\.index) + outcome.rejections.map(\.index)).sorted()
            precondition(indices == Array(batch.messages.indices))
            for (_, event) in outcome.events {
                precondition(event.app == app && !event.messageID.isEmpty)
                precondition(event.messageID.count <= MessageValidator.maxIdentifierLength)
                precondition(event.anonymousID != nil || event.userID != nil)
                precondition(Storable.problem(in: event) == nil, "an accepted event PostgreSQL would refuse")
            }
            // What goes to the quarantine is storable too.
            for rejection in outcome.rejections {
                for text in [rejection.messageID ?? "", rejection.code, rejection.message, rejection.raw] {
                    precondition(!Storable.text(text).utf8.contains(0))
                }
            }
        }
    }
    return 0
}

// SwiftPM links an executable's entry point as `<Module>_main` (aliased to `main`)
// on Linux, so libFuzzer's own `main` is never used: start its driver from ours.
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafeRawPointer, Int) -> CInt
) -> CInt

@_cdecl("FuzzMessages_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments) { data, size in fuzzMessages(data, size) }
}
