import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// The context every route and middleware of the API sees: Hummingbird's core
/// storage, the connection's peer (for trusted proxies and the access log),
/// and the request's access-log note, which the routes fill in.
struct IngestRequestContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?
    let access = AccessNote()

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// What only a route knows about its request, for its access-log line: the
/// key's prefix (never the key), the messages' fate, and the body's size.
final class AccessNote: Sendable {
    struct Fields: Sendable {
        var keyPrefix: String?
        var accepted: Int?
        var duplicates: Int?
        var suppressed: Int?
        var rejected: Int?
        var bodyBytes: Int?
    }

    private let box = NIOLockedValueBox(Fields())

    func update(_ change: (inout Fields) -> Void) { box.withLockedValue(change) }
    var fields: Fields { box.withLockedValue { $0 } }
}
