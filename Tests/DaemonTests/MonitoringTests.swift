import Foundation
import Glibc
import XCTest

/// Issue 22: the Grafana dashboard (Config/grafana/lookupd.json) and the
/// Prometheus alert rules (Config/prometheus/lookupd-alerts.yml): promtool
/// checks and unit tests, and both evaluated by a real Prometheus (Debian's)
/// scraping a daemon that has seen known traffic.
final class MonitoringTests: DaemonTestCase {
    static let config = PackageTests.repository + "/Config"
    static let dashboard = config + "/grafana/lookupd.json"
    static let rules = config + "/prometheus/lookupd-alerts.yml"
    static let promtool = "/usr/bin/promtool"
    static let prometheus = "/usr/bin/prometheus"
    private var prometheusProcess: ChildProcess?

    override func tearDown() {
        prometheusProcess?.stop(grace: 5)
        prometheusProcess = nil
        super.tearDown()
    }

    private func requireTools(file: StaticString = #filePath, line: UInt = #line) throws {
        for tool in [Self.promtool, Self.prometheus] where !FileManager.default.isExecutableFile(atPath: tool) {
            XCTFail("\(tool) is missing: scripts/install-deps installs Debian's prometheus", file: file, line: line)
            throw HarnessError.missing(tool)
        }
    }

    func testAlertRulesPassPromtoolCheckAndUnitTests() throws {
        try requireTools()
        let check = try runCommand(Self.promtool, ["check", "rules", Self.rules], folder: folder)
        XCTAssertEqual(check.status, 0, check.summary)
        XCTAssertTrue(check.stdout.contains("SUCCESS: 11 rules found"), check.summary)
        // Run where the test file is: its rule_files are relative to it.
        let test = try runCommand("/bin/sh", ["-c", "cd \"$0\" && exec \"$1\" test rules lookupd-alerts.test.yml",
                                              Self.config + "/prometheus", Self.promtool], folder: folder)
        XCTAssertEqual(test.status, 0, test.summary)
        XCTAssertTrue(test.stdout.contains("SUCCESS"), test.summary)
        // Every alert has a unit test, and a runbook paragraph in docs/OPERATIONS.md.
        let tests = readText(Self.config + "/prometheus/lookupd-alerts.test.yml")
        let operations = readText(PackageTests.repository + "/docs/OPERATIONS.md")
        for alert in alertNames() {
            XCTAssertTrue(tests.contains("alertname: \(alert)\n"), "\(alert) has a promtool unit test")
            XCTAssertTrue(operations.contains("**\(alert)**"), "\(alert) has a runbook paragraph in docs/OPERATIONS.md")
        }
    }

    /// The `expr:` of every rule (one line, or a `|` block).
    private func alertExpressions() -> [String] {
        var expressions: [String] = []
        var block: (indent: Int, lines: [String])?
        for line in readText(Self.rules).split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            let indent = line.prefix { $0 == " " }.count
            let text = line.trimmingCharacters(in: .whitespaces)
            if let open = block {
                if text.isEmpty || indent > open.indent { block?.lines.append(text); continue }
                expressions.append(open.lines.joined(separator: " "))
                block = nil
            }
            guard text.hasPrefix("expr:") else { continue }
            let value = text.dropFirst(5).trimmingCharacters(in: .whitespaces)
            if value == "|" { block = (indent, []) } else { expressions.append(value) }
        }
        return expressions
    }

    private func alertNames() -> [String] {
        readText(Self.rules).split(separator: "\n").compactMap { line in
            let text = line.trimmingCharacters(in: .whitespaces)
            return text.hasPrefix("- alert: ") ? String(text.dropFirst(9)) : nil
        }
    }

    /// What Grafana needs to import it: a Prometheus datasource variable that
    /// every panel and query uses, unique panel ids, a place on the grid.
    func testDashboardIsImportable() throws {
        let data = try XCTUnwrap(FileManager.default.contents(atPath: Self.dashboard))
        let dashboard = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        XCTAssertTrue(dashboard["id"] is NSNull, "no id: Grafana assigns one on import")
        XCTAssertEqual(dashboard["uid"] as? String, "lookupd")
        XCTAssertNotNil(dashboard["schemaVersion"] as? Int)
        let variables = try XCTUnwrap((dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]])
        let datasource = try XCTUnwrap(variables.first { $0["name"] as? String == "datasource" })
        XCTAssertEqual(datasource["type"] as? String, "datasource")
        XCTAssertEqual(datasource["query"] as? String, "prometheus")
        XCTAssertEqual(Set(variables.compactMap { $0["name"] as? String }), ["datasource", "job", "instance"])
        let panels = try XCTUnwrap(dashboard["panels"] as? [[String: Any]])
        XCTAssertGreaterThanOrEqual(panels.count, 12)
        XCTAssertEqual(Set(panels.compactMap { $0["id"] as? Int }).count, panels.count, "unique panel ids")
        for panel in panels {
            let title = panel["title"] as? String ?? "?"
            XCTAssertEqual((panel["datasource"] as? [String: String])?["uid"], "${datasource}", title)
            let grid = try XCTUnwrap(panel["gridPos"] as? [String: Int], title)
            XCTAssertTrue((grid["x"] ?? -1) >= 0 && (grid["x"] ?? 0) + (grid["w"] ?? 99) <= 24, "\(title) fits the 24 columns")
            let targets = try XCTUnwrap(panel["targets"] as? [[String: Any]], title)
            XCTAssertFalse(targets.isEmpty, title)
            for target in targets {
                XCTAssertEqual((target["datasource"] as? [String: String])?["uid"], "${datasource}", title)
                let expr = try XCTUnwrap(target["expr"] as? String, title)
                for metric in metricNames(expr) {
                    XCTAssertTrue(expr.contains(metric + "{"), "\(title): \(metric) without the job and instance selector")
                }
                // Every series is narrowed to the chosen jobs and instances.
                let selectors = expr.components(separatedBy: "{").count - 1
                XCTAssertEqual(expr.components(separatedBy: #"job=~"$job", instance=~"$instance""#).count - 1, selectors, "\(title): \(expr)")
            }
        }
        let titles = panels.compactMap { $0["title"] as? String }
        for wanted in ["Calls per second by verdict", "Blocked and identified calls per second by directory", "Answer latency (SIP)",
                       "Refused and malformed requests per second", "Reloads", "Journal", "Feed age", "Requests per second by worker"] {
            XCTAssertTrue(titles.contains(wanted), "a panel \(wanted): \(titles)")
        }
    }

    private func metricNames(_ expr: String) -> Set<String> {
        let pattern = try! NSRegularExpression(pattern: #"\b(lookupd_[a-z_]+|up)\b"#)
        return Set(pattern.matches(in: expr, range: NSRange(expr.startIndex..., in: expr)).compactMap {
            Range($0.range, in: expr).map { String(expr[$0]) }
        })
    }

    /// A real Prometheus scrapes a daemon once a second while it answers
    /// calls of every kind, refuses some, reloads (once in vain), takes a
    /// journal entry and reports a feed; then every query of every panel
    /// returns data with a value that moved, every alert rule evaluates
    /// without error, and every metric the rules name exists.
    func testDashboardAndAlertsAgainstARealPrometheus() throws {
        try skipUnderSanitizer("Prometheus's alert rules over the metrics")
        try requireTools()
        try compile(Hostile.feedCSV, to: "feed.lkd")
        let (daemon, http) = try startHTTPDaemon([
            "allow-from = 127.0.0.1/32",
            "http-allow-from = 127.0.0.1/32",
            "feed = spamco http://127.0.0.1:9/spam.csv into=\(path("spam.lkd"))",
        ], directories: statusDirectories)
        let api = try startPrometheus(scraping: http)
        XCTAssertTrue(try eventually(timeout: 30) { try query(api, #"up{job="lookupd"}"#).first?.value == 1 }, "Prometheus scrapes lookupd")

        // Traffic of every kind the panels show.
        try placeKnownCalls(port: daemon.port)
        let udp = try UDPPeer()
        let port = daemon.port
        XCTAssertEqual(udp.exchange(request("INVITE", port: port, from: "<sip:\(Caller.fraud)@pbx.example>", maxForwards: "seventy"),
                                    port: port)?.statusCode, 400)
        udp.send(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port, extra: ["X-Padding: " + String(repeating: "p", count: 20000)]), to: port)
        XCTAssertEqual(try UDPPeer(ip: "127.0.0.2").exchange(invite(from: "<sip:\(Caller.pizza)@pbx.example>", port: port), port: port)?.statusCode, 403)
        let tcp = try TCPPeer(to: port)
        XCTAssertEqual(tcp.exchange(invite(from: "<sip:\(Caller.unicom)@pbx.example>", port: port, transport: "TCP"))?.statusCode, 302)
        let outsider = try HTTPConnectionPeer(port: http, from: "127.0.0.2")
        outsider.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = outsider.closes()
        XCTAssertEqual(try lookupd(["add", "+8613000000099", "--block", "--config", daemon.configPath]).status, 0)
        let good = readText(daemon.configPath)
        write(URL(fileURLWithPath: daemon.configPath).lastPathComponent, good + "directory = missing.lkd\n")
        XCTAssertEqual(try lookupd(["reload", "--config", daemon.configPath]).status, 1)
        write(URL(fileURLWithPath: daemon.configPath).lastPathComponent, good)
        XCTAssertEqual(try lookupd(["reload", "--config", daemon.configPath]).status, 0)
        XCTAssertTrue(try eventually(timeout: 10) { try scrape(http)[#"lookupd_journal_entries{directory="main"}"#] == 1 })

        // Until Prometheus holds all of it, and a few samples more for rate().
        let arrived = { [self] in
            try [query(api, "sum(lookupd_reloads_total)"), query(api, #"sum(lookupd_journal_entries{directory="main"})"#),
                 query(api, "sum(lookupd_verdicts_total)")].map { $0.first?.value ?? -1 }
        }
        let reached = try eventually(timeout: 20) { try arrived() == [1, 1, 11] }
        let values = try arrived()
        XCTAssertTrue(reached, "the traffic reached Prometheus: reloads, journal entries, verdicts \(values)")
        sleep(3)

        let data = try XCTUnwrap(FileManager.default.contents(atPath: Self.dashboard))
        let dashboard = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        for panel in try XCTUnwrap(dashboard["panels"] as? [[String: Any]]) {
            let title = panel["title"] as? String ?? "?"
            var moved = false
            for target in panel["targets"] as? [[String: Any]] ?? [] {
                // What Grafana sends with "All" chosen and a 1 s scrape interval.
                let expr = (target["expr"] as? String ?? "").replacingOccurrences(of: "$job", with: ".+")
                    .replacingOccurrences(of: "$instance", with: ".+").replacingOccurrences(of: "$__rate_interval", with: "1m")
                let result = try query(api, expr)
                XCTAssertFalse(result.isEmpty, "\(title): no data for \(expr)")
                if result.contains(where: { $0.value.isFinite && $0.value != 0 }) { moved = true }
            }
            XCTAssertTrue(moved, "\(title): every value is 0 or NaN after the traffic")
        }

        // The alert rules, as the real Prometheus evaluates them against these metrics.
        let rules = try getJSON(api + "/api/v1/rules")
        let groups = try XCTUnwrap(((rules["data"] as? [String: Any])?["groups"] as? [[String: Any]]), "\(rules)")
        let evaluated = groups.flatMap { $0["rules"] as? [[String: Any]] ?? [] }
        XCTAssertEqual(Set(evaluated.compactMap { $0["name"] as? String }), Set(alertNames()))
        for rule in evaluated {
            XCTAssertEqual(rule["health"] as? String, "ok", "\(rule["name"] ?? "?"): \(rule["lastError"] ?? "")")
        }
        let names = try XCTUnwrap(try getJSON(api + "/api/v1/label/__name__/values")["data"] as? [String])
        for metric in metricNames(alertExpressions().joined(separator: "\n")) {
            XCTAssertTrue(names.contains(metric), "the rules name \(metric), which lookupd does not export")
        }
    }

    // MARK: - Prometheus

    /// Starts Debian's prometheus on a free loopback port scraping lookupd's
    /// http-listen every second, with the alert rules loaded; its API's base URL.
    private func startPrometheus(scraping http: UInt16) throws -> String {
        var lastError = ""
        for _ in 0..<3 {
            let port = freeLoopbackPort()
            let config = write("prometheus.yml", """
            global:
              scrape_interval: 1s
              evaluation_interval: 1s
            rule_files:
              - \(Self.rules)
            scrape_configs:
              - job_name: lookupd
                static_configs:
                  - targets: ['127.0.0.1:\(http)']

            """)
            let check = try runCommand(Self.promtool, ["check", "config", config], folder: folder)
            XCTAssertEqual(check.status, 0, check.summary)
            let child = try ChildProcess(executable: Self.prometheus, arguments: [
                "--config.file=\(config)", "--storage.tsdb.path=\(path("tsdb"))", "--web.listen-address=127.0.0.1:\(port)",
                "--log.level=warn",
            ], folder: folder, name: "prometheus")
            prometheusProcess = child
            let api = "http://127.0.0.1:\(port)"
            if eventually(timeout: 30, { !child.isRunning || ((try? getJSON(api + "/-/ready", raw: true)) != nil) }), child.isRunning {
                return api
            }
            lastError = child.stderr
            child.stop(grace: 2)
            prometheusProcess = nil
            if !lastError.contains("address already in use") { break }
        }
        XCTFail("prometheus did not start: \(lastError)")
        throw HarnessError.failed("prometheus")
    }

    /// An instant query: each series' labels and value.
    private func query(_ api: String, _ expr: String) throws -> [(labels: [String: String], value: Double)] {
        let url = api + "/api/v1/query?query=" + (expr.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        let answer = try getJSON(url)
        XCTAssertEqual(answer["status"] as? String, "success", "\(expr): \(answer)")
        let result = (answer["data"] as? [String: Any])?["result"] as? [[String: Any]] ?? []
        return result.map { series in
            let value = (series["value"] as? [Any])?.last as? String ?? "NaN"
            return (series["metric"] as? [String: String] ?? [:], Double(value) ?? .nan)
        }
    }

    private func getJSON(_ url: String, raw: Bool = false) throws -> [String: Any] {
        let result = try runCommand("/usr/bin/curl", ["-sS", "--fail-with-body", "--max-time", "10", url], folder: folder, timeout: 20)
        guard result.status == 0 else { throw HarnessError.failed("curl \(url): \(result.summary)") }
        if raw { return [:] }
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], result.stdout)
    }
}
