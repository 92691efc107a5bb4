import Answering
import CIntrinsics
import Configuration
import Glibc
import Screening
import Synchronization
import SystemCalls

/// Reload outcomes.
///
/// Threading: written by the reload thread, read by the control and HTTP threads (atomics
/// and a mutex).
final class ServiceStatus: Sendable {
    let reloads = Atomic<Int>(0)
    let failedReloads = Atomic<Int>(0)
    private let lastError = Locked<String?>(nil)
    let startedAt = monotonicNow()

    func reloaded() {
        reloads.add(1, ordering: .relaxed)
        lastError.withLock { $0 = nil }
    }

    func reloadFailed(_ error: String) {
        failedReloads.add(1, ordering: .relaxed)
        lastError.withLock { $0 = error }
    }

    var lastReloadError: String? { lastError.withLock { $0 } }
}

/// Counters of the HTTP listener (docs/OPERATIONS.md).
///
/// Threading: the listener thread writes, any thread reads.
final class HTTPCounters: @unchecked Sendable {
    enum Endpoint: Int, CaseIterable {
        /// page: the status page's files (`/`, `/status.css`, `/status.js`).
        case metrics, lookup, lookupJSON, page, statusJSON, entries, other
        var label: String {
            switch self {
            case .metrics: return "/metrics"
            case .lookup: return "/lookup"
            case .lookupJSON: return "/lookup.json"
            case .page: return "/"
            case .statusJSON: return "/status.json"
            case .entries: return "/v1/entries"
            case .other: return "other"
            }
        }
    }
    static let codes = [200, 201, 400, 401, 403, 404, 405, 408, 413, 414, 429, 431, 500, 501, 503, 505]
    enum Event: Int, CaseIterable { case accepted, refusedLimit, refusedACL, closedIdle, closedSlow, closedError }
    private let requests = CounterBlock(count: Endpoint.allCases.count * (HTTPCounters.codes.count + 1))
    private let events = CounterBlock(count: Event.allCases.count)
    /// Connections open now (a gauge).
    let open = Atomic<Int>(0)

    func add(_ endpoint: Endpoint, code: Int) {
        let c = HTTPCounters.codes.firstIndex(of: code) ?? HTTPCounters.codes.count
        requests.add(endpoint.rawValue * (HTTPCounters.codes.count + 1) + c)
    }

    func add(_ event: Event) { events.add(event.rawValue) }

    func value(_ endpoint: Endpoint, codeIndex: Int) -> UInt64 {
        requests.value(endpoint.rawValue * (HTTPCounters.codes.count + 1) + codeIndex)
    }

    func value(_ event: Event) -> UInt64 { events.value(event.rawValue) }
}

/// The operations families of the exposition text: verdicts by source, the
/// answer-time histogram, the HTTP listener and the decision log. Appended
/// to what `lookupd stats` prints, so /metrics and stats show the same.
///
/// Threading: built and written on the thread that asks (control or HTTP), from counters.
struct OperationsMetrics {
    let workers: [Worker]
    let set: ServingSet
    let http: HTTPCounters?
    let httpLatency: LatencyHistogram?
    let log: LogSink?

    func text() -> String {
        var out = ""
        func header(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        header("lookupd_verdict_sources_total", "counter",
               "Screening verdicts for initial INVITEs by the source that decided (a directory's name, contacts, callee-contacts, policy:RULE, none).")
        for verdict in Verdict.allCases {
            for slot in 0..<VerdictSourceCounters.sourceSlots {
                let value = workers.reduce(UInt64(0)) { $0 + $1.verdictSources.value(verdict: verdict, slot: slot) }
                let isDirectory = slot >= 1 && slot <= VerdictSourceCounters.directorySlots
                // Every directory's blocked and identified series exist from the start (rate() needs
                // the zero); other combinations appear once they happen.
                guard value > 0 || (isDirectory && (verdict == .blocked || verdict == .identified)) else { continue }
                guard let name = VerdictSourceCounters.sourceName(slot, set: set.screening) else { continue }
                out += "lookupd_verdict_sources_total{verdict=\"\(verdict.rawValue)\",source=\"\(escapeLabel(name))\"} \(value)\n"
            }
        }
        header("lookupd_response_duration_seconds", "histogram",
               "Time from receiving a request to sending its answer (per receive batch), by transport.")
        for transport in LatencyHistogram.Transport.allCases {
            var buckets = [UInt64](repeating: 0, count: LatencyHistogram.bounds.count + 1)
            var count: UInt64 = 0
            var sum: UInt64 = 0
            let sources: [LatencyHistogram] = transport == .http ? (httpLatency.map { [$0] } ?? []) : workers.map(\.latency)
            if transport == .http && httpLatency == nil { continue }
            for histogram in sources {
                let s = histogram.snapshot(transport)
                for i in buckets.indices { buckets[i] += s.buckets[i] }
                count += s.count
                sum += s.sum
            }
            let name = transport == .udp ? "udp" : transport == .tcp ? "tcp" : "http"
            var cumulative: UInt64 = 0
            for (i, bound) in LatencyHistogram.bounds.enumerated() {
                cumulative += buckets[i]
                out += "lookupd_response_duration_seconds_bucket{transport=\"\(name)\",le=\"\(seconds(bound))\"} \(cumulative)\n"
            }
            cumulative += buckets[LatencyHistogram.bounds.count]
            out += "lookupd_response_duration_seconds_bucket{transport=\"\(name)\",le=\"+Inf\"} \(cumulative)\n"
            out += "lookupd_response_duration_seconds_sum{transport=\"\(name)\"} \(seconds(sum))\n"
            out += "lookupd_response_duration_seconds_count{transport=\"\(name)\"} \(count)\n"
        }
        if let http {
            header("lookupd_http_requests_total", "counter", "HTTP requests answered, by endpoint and status code.")
            for endpoint in HTTPCounters.Endpoint.allCases {
                for (i, code) in (HTTPCounters.codes.map(String.init) + ["other"]).enumerated() {
                    let value = http.value(endpoint, codeIndex: i)
                    guard value > 0 || (code == "200" && endpoint != .other) else { continue }
                    out += "lookupd_http_requests_total{endpoint=\"\(endpoint.label)\",code=\"\(code)\"} \(value)\n"
                }
            }
            header("lookupd_http_connections_total", "counter", "HTTP connection events.")
            for event in HTTPCounters.Event.allCases {
                let name: String
                switch event {
                case .accepted: name = "accepted"
                case .refusedLimit: name = "refused_limit"
                case .refusedACL: name = "refused_acl"
                case .closedIdle: name = "closed_idle"
                case .closedSlow: name = "closed_slow_request"
                case .closedError: name = "closed_error"
                }
                out += "lookupd_http_connections_total{event=\"\(name)\"} \(http.value(event))\n"
            }
            header("lookupd_http_connections_open", "gauge", "HTTP connections open now (at most http-max-connections).")
            out += "lookupd_http_connections_open \(http.open.load(ordering: .relaxed))\n"
        }
        if let log {
            let stats = log.statistics
            header("lookupd_log_lines_total", "counter", "Log lines handed to the log writer, by destination.")
            out += "lookupd_log_lines_total{destination=\"stderr\"} \(stats.stderrLines)\n"
            out += "lookupd_log_lines_total{destination=\"file\"} \(stats.fileLines)\n"
            header("lookupd_log_lines_dropped_total", "counter",
                   "Log lines dropped because the log writer fell behind (the answering threads never wait for it).")
            out += "lookupd_log_lines_dropped_total{destination=\"stderr\"} \(stats.stderrDropped)\n"
            out += "lookupd_log_lines_dropped_total{destination=\"file\"} \(stats.fileDropped)\n"
            header("lookupd_log_file_rotations_total", "counter", "Rotations of the decision log file.")
            out += "lookupd_log_file_rotations_total \(stats.rotations)\n"
            header("lookupd_log_file_errors_total", "counter", "Failed writes or opens of the decision log file.")
            out += "lookupd_log_file_errors_total \(stats.fileErrors)\n"
        }
        return out
    }

    private func seconds(_ nanoseconds: UInt64) -> String {
        let whole = nanoseconds / 1_000_000_000
        var fraction = String(nanoseconds % 1_000_000_000)
        fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
        while fraction.hasSuffix("0") { fraction.removeLast() }
        return fraction.isEmpty ? "\(whole)" : "\(whole).\(fraction)"
    }
}

/// A Prometheus label value: backslash, double quote and newline escaped.
func escapeLabel(_ s: String) -> String {
    var out = ""
    for c in s.unicodeScalars {
        switch c {
        case "\\": out += "\\\\"
        case "\"": out += "\\\""
        case "\n": out += "\\n"
        default: out.unicodeScalars.append(c)
        }
    }
    return out
}
