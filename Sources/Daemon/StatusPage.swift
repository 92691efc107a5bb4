import Answering
import Glibc

/// The operator's status page on `http-listen` (docs/OPERATIONS.md): `/`
/// with its stylesheet and script, served from the binary (no framework, no
/// CDN: it works on a network without the Internet), and `/status.json`,
/// the document the page reads every few seconds. Read-only, behind the
/// listener's access list like every other path.
///
/// Threading: `tick` and `document` on the HTTP thread; what they read
/// (worker counters, the log sink's recent lines, reload outcomes) may be
/// read from any thread.
final class StatusPage: Sendable {
    let history = VerdictHistory()
    private let version: String
    private let workers: [Worker]
    private let status: ServiceStatus
    private let log: LogSink?

    init(version: String, workers: [Worker], status: ServiceStatus, log: LogSink?) {
        self.version = version
        self.workers = workers
        self.status = status
        self.log = log
    }

    /// Once a second: the per-minute counts follow the workers' counters.
    func tick() {
        history.sample(totals: Worker.verdictTotals(workers), now: Int(time(nil)))
    }

    /// `/status.json` for the set in force.
    func document(set: ServingSet) -> [UInt8] {
        tick()
        return StatusDocument(version: version, set: set, workers: workers, status: status, minutes: history.minutes,
                              recent: log?.recentCalls ?? [], now: Int(time(nil))).json()
    }

    struct Asset: Sendable {
        let contentType: String
        let body: [UInt8]
    }

    /// The page's files by path.
    static let assets: [String: Asset] = [
        "/": Asset(contentType: "text/html; charset=utf-8", body: Array(StatusPageAssets.html.utf8)),
        "/status.css": Asset(contentType: "text/css; charset=utf-8", body: Array(StatusPageAssets.css.utf8)),
        "/status.js": Asset(contentType: "text/javascript; charset=utf-8", body: Array(StatusPageAssets.script.utf8)),
    ]

    /// With every file of the page. The policy allows only the page's own
    /// script and stylesheet and requests to this listener: even text that
    /// got past the escaping could not run a script or send data elsewhere.
    /// Revalidated on every load, so an upgraded daemon's page is never mixed
    /// with a cached old script.
    static let pageHeaders = "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        + "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n"
        + "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nX-Frame-Options: DENY\r\nCache-Control: no-cache\r\n"

    /// With `/status.json`: never cached, never sniffed as anything but JSON.
    static let documentHeaders = "X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n"
}
