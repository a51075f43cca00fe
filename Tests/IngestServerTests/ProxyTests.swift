import AsyncHTTPClient
import EventLog
import Foundation
import IngestServer
import NIOCore
import NIOHTTP1
import NIOSSL
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The server behind real nginx terminating TLS (a self-signed certificate
/// from openssl): the settings document must send an SDK to the proxy's
/// public https address, not to the plain-HTTP address nginx uses inside.
@Suite("behind a TLS-terminating proxy")
struct ProxyTests {
    @Test("a client that follows the settings document fetched through nginx uploads through nginx", .timeLimit(.minutes(6)))
    func settingsPointThroughTheProxy() async throws {
        let nginx = try #require(
            Nginx.executable(), "nginx is not installed: run `apt-get install nginx` (scripts/test installs it) — this test does not skip")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("onramp-proxy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Nginx.makeCertificate(in: directory)

        let loopback = try IPNetwork("127.0.0.1")
        try await withServer(configure: { $0.forwarding = Forwarding(trustedProxies: [loopback]) }) { h in
            let upstream = try #require(URL(string: h.url)?.port)
            let proxy = try await Nginx.start(nginx, in: directory, upstream: upstream)
            defer { proxy.stop() }

            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(directory.appendingPathComponent("cert.pem").path))
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))

            // The client is shut down on every path: a failed expectation must not leave it to its deinit.
            let outcome: Result<Void, any Error>
            do {
                // What analytics-swift does at start-up: fetch the settings, then upload to https://apiHost/b.
                let publicBase = "https://localhost:\(proxy.port)"
                let settings = try await Self.get(client, "\(publicBase)/v1/projects/\(h.key)/settings")
                let segment = try #require(((settings["integrations"] as? [String: Any])?["Segment.io"]) as? [String: Any])
                let apiHost = try #require(segment["apiHost"] as? String)
                #expect(apiHost == "localhost:\(proxy.port)/v1", "the public address, not the upstream 127.0.0.1:\(upstream)")
                #expect(segment["protocol"] as? String == "https")

                var upload = HTTPClientRequest(url: "https://\(apiHost)/b")
                upload.method = .POST
                upload.headers.add(name: "Content-Type", value: "application/json")
                upload.headers.add(name: "Authorization", value: "Basic " + Data("\(h.key):".utf8).base64EncodedString())
                upload.body = .bytes(ByteBuffer(string: Fixtures.batch([Fixtures.track("via-proxy-1"), Fixtures.track("via-proxy-2")])))
                let response = try await client.execute(upload, timeout: .seconds(30))
                let body = String(buffer: try await response.body.collect(upTo: 1 << 20))
                #expect(response.status == .ok, "\(body)")
                #expect(body.contains(#""accepted":2"#), "\(body)")
                #expect(try await h.count("SELECT count(*) FROM events WHERE message_id LIKE 'via-proxy-%'") == 2)

                // Straight to the server, no proxy in between: its own address, plain HTTP.
                let direct = try await h.send(.GET, "/v1/projects/\(h.key)/settings")
                #expect(direct.body.contains(#""apiHost":"127.0.0.1:\#(upstream)/v1""#), "\(direct.body)")
                #expect(direct.body.contains(#""protocol":"http""#))
                print("proxy: settings through \(publicBase) advertise apiHost \(apiHost), protocol https; upload: \(response.status.code) \(body)")
                outcome = .success(())
            } catch {
                outcome = .failure(error)
            }
            try await client.shutdown()
            try outcome.get()
        }
    }

    static func get(_ client: HTTPClient, _ url: String) async throws -> [String: Any] {
        let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
        let buffer = try await response.body.collect(upTo: 1 << 20)
        #expect(response.status == .ok, "\(url): \(String(buffer: buffer))")
        return try #require(try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any])
    }
}

/// Debian's nginx, run as one foreground process on a free loopback port.
enum Nginx {
    struct Running {
        let process: Process
        let port: Int

        /// SIGKILL: a child of the test process inherits its blocked signals, so nginx never sees SIGTERM.
        func stop() {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    static func executable() -> String? {
        ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// `cert.pem` and `key.pem` for localhost and 127.0.0.1, valid for two days.
    static func makeCertificate(in directory: URL) throws {
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout", directory.appendingPathComponent("key.pem").path, "-out", directory.appendingPathComponent("cert.pem").path,
        ]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        try #require(openssl.terminationStatus == 0, "openssl could not make a certificate")
    }

    /// TLS on a free port, proxying to `upstream` with the usual forwarded headers.
    static func start(_ nginx: String, in directory: URL, upstream: Int) async throws -> Running {
        for _ in 0..<10 {
            let port = Int.random(in: 20_000..<60_000)
            let config = directory.appendingPathComponent("nginx.conf")
            let d = directory.path
            try Data("""
                daemon off;
                master_process off;
                pid \(d)/nginx.pid;
                error_log \(d)/error.log warn;
                events { worker_connections 256; }
                http {
                  access_log off;
                  client_body_temp_path \(d)/body; proxy_temp_path \(d)/proxy; fastcgi_temp_path \(d)/fastcgi;
                  uwsgi_temp_path \(d)/uwsgi; scgi_temp_path \(d)/scgi;
                  server {
                    listen 127.0.0.1:\(port) ssl;
                    ssl_certificate \(d)/cert.pem;
                    ssl_certificate_key \(d)/key.pem;
                    location / {
                      proxy_pass http://127.0.0.1:\(upstream);
                      proxy_http_version 1.1;
                      proxy_set_header X-Forwarded-Proto $scheme;
                      proxy_set_header X-Forwarded-Host $http_host;
                      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
                    }
                  }
                }
                """.utf8).write(to: config)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: nginx)
            process.arguments = ["-p", d, "-e", "\(d)/error.log", "-c", config.path]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Listening, or exited (the port was taken: try another).
            for _ in 0..<50 where process.isRunning {
                if Self.accepts(port) { return Running(process: process, port: port) }
                try await Task.sleep(for: .milliseconds(100))
            }
            Running(process: process, port: port).stop()
        }
        let log = (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
        throw NginxDidNotStart(description: "nginx did not start: \(log.suffix(2000))")
    }

    struct NginxDidNotStart: Error, CustomStringConvertible {
        let description: String
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(_ port: Int) -> Bool { RawConnection(port: port) != nil }
}
