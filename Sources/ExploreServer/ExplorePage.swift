import Hummingbird
import NIOCore

/// The explorer's page (Resources/explore.html), compiled into the binary:
/// one file, its script and style inline, nothing fetched from elsewhere.
enum ExplorePage {
    static let bytes = ByteBuffer(bytes: PackageResources.explore_html)

    /// Only its own inline script and style, and calls back to this server.
    static let policy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    static var response: Response {
        Response(
            status: .ok,
            headers: [
                .contentType: "text/html; charset=utf-8", .contentSecurityPolicy: policy, .cacheControl: "no-store",
                .xContentTypeOptions: "nosniff",
            ],
            body: .init(byteBuffer: bytes))
    }
}
