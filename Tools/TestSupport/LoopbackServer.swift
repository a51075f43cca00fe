public import Hummingbird
public import Logging
public import ServiceLifecycle

/// Runs `router` on a free port of 127.0.0.1 while `body` runs (given the
/// port), then shuts it down: the page server of the browser test, the relay
/// in front of the server in the SDK's queue tests.
public func withLoopbackServer(_ router: Router<BasicRequestContext>, _ body: @Sendable (Int) async throws -> Void) async throws {
    var logger = Logger(label: "loopback-server")
    logger.logLevel = .critical
    try await withRunningServer(logger: logger, { onRunning in
        Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? 0) }, logger: logger)
    }, body)
}

/// Runs the server `make` builds (handed the callback it must call with its
/// bound port once it listens) in a service group while `body` runs, given
/// that port, then shuts it down gracefully: a route server, or a product's
/// whole application (the explorer's).
public func withRunningServer<Server: Service>(
    logger: Logger, _ make: (@escaping @Sendable (Int) async -> Void) throws -> Server, _ body: @Sendable (Int) async throws -> Void
) async throws {
    let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
    let server = try make { port in
        portSink.yield(port)
        portSink.finish()
    }
    let group = ServiceGroup(configuration: .init(services: [server], logger: logger))
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
