import Crypto
import Foundation
import Hummingbird
import NIOCore

/// The explorer's page (Resources/explore.html), compiled into the binary:
/// one file, its script and style inline, nothing fetched from elsewhere.
enum ExplorePage {
    static let bytes = ByteBuffer(bytes: PackageResources.explore_html)

    /// Only its own script (by its digest, so no other inline script runs,
    /// should a value ever reach the page as markup), its inline style, and
    /// calls back to this server.
    static let policy =
        "default-src 'none'; script-src '\(scriptDigest)'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// `sha256-…` of the page's one inline script, as CSP names it.
    static let scriptDigest: String = {
        let page = String(decoding: PackageResources.explore_html, as: UTF8.self)
        guard let open = page.range(of: "<script>"), let close = page.range(of: "</script>", range: open.upperBound..<page.endIndex) else {
            return "none"
        }
        let script = Data(page[open.upperBound..<close.lowerBound].utf8)
        return "sha256-" + Data(SHA256.hash(data: script)).base64EncodedString()
    }()

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
