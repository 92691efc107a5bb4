import Answering
import Directory
import Replication

/// The daemon's counters and state in the Prometheus text exposition
/// format: what `lookupd stats` prints. Totals first, then each worker's
/// share with a `worker` label.
///
/// Threading: built on the thread that asks, reading counters other threads write.
struct StatsReport {
    let workers: [Worker]
    let set: ServingSet
    let uptime: Double
    let reloads: Int
    let failedReloads: Int
    let lastReloadError: String?
    /// The replication thread's state, when `replicate` is set.
    var replication: ReplicationFeed.Report? = nil

    /// - Parameter extra: more families (OperationsMetrics), placed before the uptime.
    func text(appending extra: String = "") -> String {
        var out = ""
        var lastName = ""
        func header(_ name: String, _ type: String, _ help: String) {
            guard name != lastName else { return }
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            lastName = name
        }
        let help: [String: String] = [
            "lookupd_requests_total": "SIP requests received, by method and transport.",
            "lookupd_verdicts_total": "Screening verdicts for initial INVITEs.",
            "lookupd_responses_total": "SIP responses sent, by status code.",
            "lookupd_malformed_total": "Malformed requests, answered with 400 or dropped.",
            "lookupd_refused_total": "Requests refused before screening (size limit, allow-from).",
            "lookupd_dropped_total": "Messages dropped without an answer, by reason.",
            "lookupd_labels_refused_total": "Labels left out of an answer because they were unsafe for a header.",
            "lookupd_responses_trimmed_total": "UDP answers made smaller (the label out of P-Asserted-Identity, or out) to stay within 3 times the request's size.",
            "lookupd_send_errors_total": "Answers the kernel refused to send.",
            "lookupd_tcp_connections_total": "SIP TCP connection events.",
            "lookupd_tcp_keepalives_total": "CRLF keep-alives received on TCP.",
            "lookupd_policy_total": "Calls a caller policy acted on (bypass, label, block, contact ignored, directory outside its active window).",
            "lookupd_proxy_forwarded_total": "Proxy mode: requests sent to the upstream and responses sent back toward callers.",
            "lookupd_proxy_dropped_total": "Proxy mode: responses dropped (top Via not lookupd's, no next Via, malformed, next hop unreachable).",
            "lookupd_proxy_refused_total": "Proxy mode: requests answered instead of forwarded (from the upstream, 483, 482 loop, 503 upstream down, 400 for a Via that cannot carry the source).",
            "lookupd_proxy_upstream_total": "Proxy mode: events on the way to the upstream (connections, ICMP unreachable, send errors, probes).",
            "lookupd_proxy_absorbed_total": "Proxy mode: ACKs for answers lookupd gave itself, not forwarded.",
            "lookupd_udp_receive_calls_total": "recvmmsg calls on the SIP UDP sockets, those that found nothing included.",
            "lookupd_udp_datagrams_received_total": "Datagrams those recvmmsg calls returned (divided by the calls: the batch size).",
            "lookupd_udp_send_calls_total": "sendmmsg calls sending answers on the SIP UDP sockets.",
            "lookupd_worker_wakeups_total": "Workers' epoll_wait returns that reported a ready descriptor (wake-ups).",
        ]
        // A family's series together under one HELP and TYPE, as the format requires,
        // even where its cases are not next to each other in Counter.
        var order: [String] = []
        for counter in Counter.allCases where !order.contains(counter.metric.name) { order.append(counter.metric.name) }
        let grouped = order.flatMap { name in Counter.allCases.filter { $0.metric.name == name } }
        for counter in grouped {
            let (name, labels) = counter.metric
            header(name, "counter", help[name] ?? "")
            let total = workers.reduce(UInt64(0)) { $0 + $1.counters.value(counter) }
            out += labels.isEmpty ? "\(name) \(total)\n" : "\(name){\(labels)} \(total)\n"
        }
        header("lookupd_worker_requests_total", "counter", "SIP requests received, by worker.")
        for worker in workers {
            let total = Counter.allCases.prefix(2 * Counter.methodOffset).reduce(UInt64(0)) { $0 + worker.counters.value($1) }
            out += "lookupd_worker_requests_total{worker=\"\(worker.index)\"} \(total)\n"
        }
        header("lookupd_reloads_total", "counter", "Successful reloads.")
        out += "lookupd_reloads_total \(reloads)\n"
        header("lookupd_reload_failures_total", "counter", "Reloads refused (the previous set stayed in force).")
        out += "lookupd_reload_failures_total \(failedReloads)\n"
        header("lookupd_last_reload_successful", "gauge", "0 while the last reload failed (the set before it stays in force), else 1.")
        out += "lookupd_last_reload_successful \(lastReloadError == nil ? 1 : 0)\n"
        header("lookupd_generation", "gauge", "Generation number of the set in force.")
        out += "lookupd_generation \(set.generation)\n"
        header("lookupd_directory_entries", "gauge", "Numbers in each directory in force.")
        for d in set.screening.directories {
            out += "lookupd_directory_entries{directory=\"\(escapeLabel(d.name))\"} \(d.file.count)\n"
        }
        header("lookupd_directory_prefix_rules", "gauge", "Prefix rules in each directory in force.")
        for d in set.screening.directories {
            out += "lookupd_directory_prefix_rules{directory=\"\(escapeLabel(d.name))\"} \(d.file.prefixRuleCount)\n"
        }
        header("lookupd_directory_version", "gauge", "Version number each directory was compiled with.")
        for d in set.screening.directories {
            out += "lookupd_directory_version{directory=\"\(escapeLabel(d.name))\",checksum=\"\(hex16(d.file.header.contentChecksum))\"} \(d.file.header.directoryVersion)\n"
        }
        header("lookupd_contacts", "gauge", "Numbers in each contacts list in force.")
        for c in set.screening.contacts {
            out += "lookupd_contacts{list=\"\(escapeLabel(c.name))\"} \(c.count)\n"
        }
        for family in journalGauges() {
            header(family.name, "gauge", family.help)
            for line in family.lines { out += line }
        }
        for family in replicationFamilies() {
            header(family.name, family.type, family.help)
            for line in family.lines { out += line }
        }
        for family in feedGauges() {
            header(family.name, "gauge", family.help)
            for line in family.lines { out += line }
        }
        out += extra
        lastName = ""
        header("lookupd_uptime_seconds", "gauge", "Seconds since start.")
        out += "lookupd_uptime_seconds \(Int(uptime))\n"
        header("lookupd_workers", "gauge", "Worker threads.")
        out += "lookupd_workers \(workers.count)\n"
        if let lastReloadError {
            out += "# last reload failure: \(lastReloadError.replacingNewlines())\n"
        }
        return out
    }
}

/// 16 hexadecimal digits, as checksums are shown everywhere.
func hex16(_ v: UInt64) -> String {
    let s = String(v, radix: 16)
    return String(repeating: "0", count: 16 - s.count) + s
}

extension String {
    func replacingNewlines() -> String {
        String(map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }
}
