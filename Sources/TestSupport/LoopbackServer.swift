public import Hummingbird
import Logging
import ServiceLifecycle

/// Runs `router` on a free port of 127.0.0.1 while `body` runs (given the
/// port), then shuts it down: the page server of the browser test, the relay
/// in front of the server in the SDK's queue tests.
public func withLoopbackServer(_ router: Router<BasicRequestContext>, _ body: @Sendable (Int) async throws -> Void) async throws {
    let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
    var logger = Logger(label: "loopback-server")
    logger.logLevel = .critical
    let app = Application(
        router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in
            portSink.yield(channel.localAddress?.port ?? 0)
            portSink.finish()
        }, logger: logger)
    let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
    let outcome: Result<Void, any Error> = await withTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try? await group.run() }
        var port = 0
        for await p in ports { port = p }
        let result: Result<Void, any Error>
        do { result = .success(try await body(port)) } catch { result = .failure(error) }
        await group.triggerGracefulShutdown()
        return result
    }
    try outcome.get()
}
