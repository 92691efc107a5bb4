import CIntrinsics
import Configuration
import Glibc
import Screening
import Synchronization
import SystemCalls

/// A fixed block of single-writer counters: one thread adds (a relaxed load
/// and store, no locked instruction), any thread reads. The same scheme as
/// `WorkerCounters`, for the counters whose number is not a `Counter` case.
final class CounterBlock: @unchecked Sendable {
    private let slots: UnsafeMutablePointer<UInt64>
    let count: Int

    init(count: Int) {
        self.count = count
        // Whole cache lines, so two writers' blocks never share one.
        let padded = (count + 7) & ~7
        slots = .allocate(capacity: padded)
        slots.initialize(repeating: 0, count: padded)
    }

    deinit { slots.deallocate() }

    @inline(__always)
    func add(_ index: Int, _ amount: UInt64 = 1) { lookupd_counter_add(slots + index, amount) }

    func value(_ index: Int) -> UInt64 { lookupd_counter_load(slots + index) }
}

/// Time from receiving a request to sending its answer, in fixed buckets,
/// one histogram per transport, written by one thread.
///
/// Workers take one timestamp when a batch (a recvmmsg, or a read on a TCP
/// connection) arrives and one when its answers are sent, and count every
/// answer of the batch with that duration: two clock reads per batch, not
/// per request, at the price of charging each request its batch's whole time.
final class LatencyHistogram: @unchecked Sendable {
    enum Transport: Int, CaseIterable { case udp, tcp, http }
    /// Upper bounds in nanoseconds (10 µs ... 1 s); one more slot for +Inf.
    static let bounds: [UInt64] = [10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
                                   5_000_000, 10_000_000, 25_000_000, 50_000_000, 100_000_000, 250_000_000,
                                   500_000_000, 1_000_000_000]
    /// Per transport: the buckets, +Inf, count, sum of nanoseconds.
    private static let stride = bounds.count + 3
    private let block = CounterBlock(count: Transport.allCases.count * LatencyHistogram.stride)

    @inline(__always)
    func observe(_ transport: Transport, nanoseconds: UInt64, count: Int = 1) {
        guard count > 0 else { return }
        let base = transport.rawValue * LatencyHistogram.stride
        var bucket = LatencyHistogram.bounds.count
        for i in LatencyHistogram.bounds.indices where nanoseconds <= LatencyHistogram.bounds[i] {
            bucket = i
            break
        }
        block.add(base + bucket, UInt64(count))
        block.add(base + LatencyHistogram.bounds.count + 1, UInt64(count))
        block.add(base + LatencyHistogram.bounds.count + 2, nanoseconds &* UInt64(count))
    }

    /// Non-cumulative bucket counts (the last is +Inf), the count and the sum in nanoseconds.
    func snapshot(_ transport: Transport) -> (buckets: [UInt64], count: UInt64, sum: UInt64) {
        let base = transport.rawValue * LatencyHistogram.stride
        let buckets = (0...LatencyHistogram.bounds.count).map { block.value(base + $0) }
        return (buckets, block.value(base + LatencyHistogram.bounds.count + 1), block.value(base + LatencyHistogram.bounds.count + 2))
    }
}

/// Verdicts by the source that decided them. A directory is counted by its
/// position in the configuration and named at scrape time, so a reload
/// that reorders directories carries a position's count over to the
/// directory now in that place (Prometheus sees a counter that may jump;
/// restarts have the same effect).
final class VerdictSourceCounters: @unchecked Sendable {
    static let directorySlots = 64
    /// none, directories, more directories, contacts, callee contacts, one per policy rule.
    static let sourceSlots = 1 + directorySlots + 1 + 2 + PolicyRule.allCases.count
    private let block = CounterBlock(count: Verdict.allCases.count * VerdictSourceCounters.sourceSlots)
    private static let verdictIndex: [Verdict: Int] = Dictionary(uniqueKeysWithValues: Verdict.allCases.enumerated().map { ($1, $0) })

    @inline(__always)
    func add(_ decision: Decision) {
        let v = VerdictSourceCounters.index(decision.verdict)
        block.add(v * VerdictSourceCounters.sourceSlots + VerdictSourceCounters.slot(decision.source))
    }

    @inline(__always)
    static func index(_ verdict: Verdict) -> Int {
        switch verdict {
        case .blocked: return 0
        case .identified: return 1
        case .contact: return 2
        case .unknown: return 3
        case .anonymous: return 4
        case .invalid: return 5
        case .bypassed: return 6
        }
    }

    static func slot(_ source: DecisionSource?) -> Int {
        switch source {
        case nil: return 0
        case .directory(let i)?: return 1 + min(i, directorySlots)
        case .contacts?: return 2 + directorySlots
        case .calleeContacts?: return 3 + directorySlots
        case .policy(let rule)?: return 4 + directorySlots + PolicyRule.allCases.firstIndex(of: rule)!
        }
    }

    func value(verdict: Verdict, slot: Int) -> UInt64 {
        block.value(VerdictSourceCounters.index(verdict) * VerdictSourceCounters.sourceSlots + slot)
    }

    /// The label value for a slot, with the directory names of `set`.
    static func sourceName(_ slot: Int, set: ScreeningSet) -> String? {
        switch slot {
        case 0: return "none"
        case 1...directorySlots:
            let i = slot - 1
            return i < set.directories.count ? set.directories[i].name : nil
        case 1 + directorySlots: return set.directories.count > directorySlots ? "other-directories" : nil
        case 2 + directorySlots: return "contacts"
        case 3 + directorySlots: return "callee-contacts"
        default: return "policy:" + PolicyRule.allCases[slot - 4 - directorySlots].rawValue
        }
    }
}

/// Reload outcomes, written by the control loop and read by the HTTP thread.
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

/// Counters of the HTTP listener (docs/OPERATIONS.md), written by its thread.
final class HTTPCounters: @unchecked Sendable {
    enum Endpoint: Int, CaseIterable {
        /// page: the status page's files (`/`, `/status.css`, `/status.js`).
        case metrics, lookup, lookupJSON, page, statusJSON, other
        var label: String {
            switch self {
            case .metrics: return "/metrics"
            case .lookup: return "/lookup"
            case .lookupJSON: return "/lookup.json"
            case .page: return "/"
            case .statusJSON: return "/status.json"
            case .other: return "other"
            }
        }
    }
    static let codes = [200, 400, 403, 404, 405, 408, 413, 414, 431, 501, 503, 505]
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
