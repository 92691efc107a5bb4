import Foundation
import Glibc
import XCTest

/// Text that would become markup, or run, if the page ever parsed data as HTML.
enum Hostile {
    /// A caller's display name.
    static let displayName = #"<script>window.__lookupdPwned=true</script>"#
    /// A label from a feed.
    static let label = #"<img src=x onerror="window.__lookupdPwned=true"> Spam & Co"#
    /// Blocked by the "feed" directory with that label.
    static let number = "+8613300000001"
    static let feedCSV = "number,action,label\n+8613300000001,block,\"<img src=x onerror=\"\"window.__lookupdPwned=true\"\"> Spam & Co\"\n"
}

extension DaemonTestCase {
    /// The "feed" directory (a hostile label) next to the standard "main".
    var statusDirectories: [String] { ["main.lkd name=main", "feed.lkd name=feed"] }

    /// Calls of every common verdict, each answered as expected; returns
    /// them per verdict (in the order of `verdicts`), newest last:
    /// 4 blocked (one with a hostile display name, one with a hostile
    /// label), 2 identified, 1 contact, 2 unknown, 1 anonymous.
    @discardableResult
    func placeKnownCalls(port: UInt16, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Int] {
        let udp = try UDPPeer()
        let calls: [(from: String, status: Int)] = [
            ("\"\(Hostile.displayName.replacingOccurrences(of: "\"", with: "\\\""))\" <sip:\(Caller.fraud)@pbx.example>", 603),
            ("<sip:\(Caller.pizza)@pbx.example>", 302),
            ("<sip:\(Caller.virtualRange)@pbx.example>", 603),
            ("<sip:\(Caller.mum)@pbx.example>", 302),
            ("<sip:\(Caller.unknown)@pbx.example>", 302),
            ("\"Anonymous\" <sip:anonymous@anonymous.invalid>", 302),
            ("<sip:\(Caller.cafe)@pbx.example>", 302),
            ("\"Spam & Co\" <sip:\(Hostile.number)@pbx.example>", 603),
            ("<sip:+8613000000002@pbx.example>", 302),
            ("<sip:\(Caller.blockedUnlabelled)@pbx.example>", 603),
        ]
        for call in calls {
            XCTAssertEqual(udp.exchange(invite(from: call.from, to: "1001", port: port), port: port)?.statusCode, call.status,
                           call.from, file: file, line: line)
        }
        return ["blocked": 4, "identified": 2, "contact": 1, "unknown": 2, "anonymous": 1, "invalid": 0, "bypassed": 0]
    }

    /// `/status.json`, parsed, with its raw body.
    func statusDocument(_ httpPort: UInt16, file: StaticString = #filePath, line: UInt = #line) throws -> (object: [String: Any], body: String) {
        let (status, body) = try curl("http://127.0.0.1:\(httpPort)/status.json")
        XCTAssertEqual(status, 200, body, file: file, line: line)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any], body, file: file, line: line)
        return (object, body)
    }
}

/// Issue 22: the status page on http-listen (`/`, its files, `/status.json`):
/// what it reports, that hostile text stays text, who may see it, and the
/// page itself in headless Chromium.
final class StatusPageTests: DaemonTestCase {
    func testStatusDocumentReportsCountsDirectoriesAndRecentCalls() throws {
        try compile(Hostile.feedCSV, to: "feed.lkd")
        let (withFeed, port) = try startHTTPDaemon([], directories: statusDirectories)
        let expected = try placeKnownCalls(port: withFeed.port)
        // The answer goes out before the worker hands the batch's log lines on.
        XCTAssertTrue(try eventually(timeout: 5) {
            ((try statusDocument(port).object["recent"] as? [String: Any])?["calls"] as? [Any])?.count == 6
        })

        let (document, body) = try statusDocument(port)
        XCTAssertFalse(body.contains("<") || body.contains(">"), "markup characters leave as \\u escapes: \(body)")
        let verdicts = try XCTUnwrap(document["verdicts"] as? [String])
        XCTAssertEqual(verdicts, ["blocked", "identified", "contact", "unknown", "anonymous", "invalid", "bypassed"])
        let totals = try XCTUnwrap(document["totals"] as? [Int])
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: zip(verdicts, totals)), expected, "since start")
        // The per-minute ring holds exactly the same calls, ending in the current minute.
        let minutes = try XCTUnwrap(document["minutes"] as? [[String: Any]])
        XCTAssertTrue((1...60).contains(minutes.count), "\(minutes.count) minutes")
        let counts = minutes.compactMap { $0["counts"] as? [Int] }
        XCTAssertEqual(counts.count, minutes.count)
        XCTAssertEqual(verdicts.indices.map { i in counts.reduce(0) { $0 + $1[i] } }, totals, "the hour's minutes add up to the totals")
        let now = try XCTUnwrap(document["now"] as? Int)
        let lastStart = try XCTUnwrap(minutes.last?["start"] as? Int)
        XCTAssertEqual(lastStart, now - now % 60, "the last minute is the current one")
        let starts = minutes.compactMap { $0["start"] as? Int }
        XCTAssertEqual(starts, starts.sorted(), "oldest first")
        XCTAssertTrue(zip(starts, starts.dropFirst()).allSatisfy { $1 - $0 == 60 }, "consecutive minutes: \(starts)")

        // The decision log's blocked and identified calls, newest first, fields as logged.
        let recent = try XCTUnwrap(document["recent"] as? [String: Any])
        XCTAssertEqual(recent["logged"] as? [String], ["blocked", "identified"], "log-level = info logs both")
        let calls = try XCTUnwrap(recent["calls"] as? [[String: Any]])
        XCTAssertEqual(calls.map { $0["caller"] as? String }, [Caller.blockedUnlabelled, Hostile.number, Caller.cafe, Caller.virtualRange,
                                                               Caller.pizza, Caller.fraud])
        XCTAssertEqual(calls.map { $0["verdict"] as? String }, ["blocked", "blocked", "identified", "blocked", "identified", "blocked"])
        XCTAssertEqual(calls.last?["display-name"] as? String, Hostile.displayName)
        XCTAssertEqual(calls.last?["label"] as? String, "Fraud Risk")
        XCTAssertEqual(calls.last?["response"] as? Int, 603)
        XCTAssertEqual(calls.last?["callee"] as? String, "1001")
        XCTAssertEqual(calls.last?["source"] as? String, "main")
        XCTAssertEqual(calls[1]["label"] as? String, Hostile.label)
        XCTAssertEqual(calls[1]["source"] as? String, "feed")
        XCTAssertEqual(calls[2]["label"] as? String, Caller.cafeLabel)
        XCTAssertNotNil((calls[0]["time"] as? String).flatMap { $0.hasSuffix("Z") ? $0 : nil })

        // Directories, their journals, contacts; then a journal entry and two reloads.
        func directory(_ d: [String: Any], _ name: String) -> [String: Any]? {
            (d["directories"] as? [[String: Any]])?.first { $0["name"] as? String == name }
        }
        let main = try XCTUnwrap(directory(document, "main"))
        XCTAssertEqual(main["entries"] as? Int, 7)
        XCTAssertEqual(main["prefix_rules"] as? Int, 1)
        XCTAssertEqual(main["path"] as? String, path("main.lkd"))
        XCTAssertEqual((main["checksum"] as? String)?.count, 16)
        XCTAssertEqual(main["active_now"] as? Bool, true)
        XCTAssertEqual((main["journal"] as? [String: Any])?["entries"] as? Int, 0)
        XCTAssertEqual((main["journal"] as? [String: Any])?["bytes"] as? Int, 0)
        XCTAssertEqual(directory(document, "feed")?["entries"] as? Int, 1)
        XCTAssertEqual((document["contacts"] as? [[String: Any]])?.first?["numbers"] as? Int, 2)
        XCTAssertEqual(document["mode"] as? String, "redirect")
        XCTAssertEqual(document["version"] as? String, try lookupd(["--version"]).stdout.split(separator: "\n").first?.split(separator: " ").last.map(String.init))

        let add = try lookupd(["add", "+8613000000099", "--block", "--label", "Late Addition", "--config", withFeed.configPath])
        XCTAssertEqual(add.status, 0, add.summary)
        XCTAssertTrue(try eventually(timeout: 10) {
            let journal = try directory(statusDocument(port).object, "main")?["journal"] as? [String: Any]
            return journal?["entries"] as? Int == 1 && (journal?["bytes"] as? Int ?? 0) > 0 && journal?["sequence"] as? Int == 1
        }, "the journal entry shows")
        let generation = try XCTUnwrap(try statusDocument(port).object["generation"] as? Int)
        let good = readText(withFeed.configPath)
        write(URL(fileURLWithPath: withFeed.configPath).lastPathComponent, good + "directory = missing.lkd\n")
        XCTAssertEqual(try lookupd(["reload", "--config", withFeed.configPath]).status, 1)
        let reloads = try XCTUnwrap(try statusDocument(port).object["reloads"] as? [String: Any])
        XCTAssertEqual(reloads["failed"] as? Int, 1)
        XCTAssertTrue((reloads["last_error"] as? String)?.contains("missing.lkd") == true, "\(reloads)")
        XCTAssertEqual(try scrape(port)["lookupd_last_reload_successful"], 0)
        write(URL(fileURLWithPath: withFeed.configPath).lastPathComponent, good)
        XCTAssertEqual(try lookupd(["reload", "--config", withFeed.configPath]).status, 0)
        let after = try statusDocument(port).object
        XCTAssertTrue((after["reloads"] as? [String: Any])?["last_error"] is NSNull)
        XCTAssertEqual(after["generation"] as? Int, generation + 1)
        XCTAssertEqual(try scrape(port)["lookupd_last_reload_successful"], 1)

        // The page's files: from the binary, with a policy that allows nothing but themselves.
        let headers = path("headers.txt")
        let page = try curl("http://127.0.0.1:\(port)/", ["-D", headers])
        XCTAssertEqual(page.status, 200)
        XCTAssertTrue(page.body.hasPrefix("<!doctype html>"), page.body)
        XCTAssertTrue(page.body.contains(#"<script src="status.js" defer></script>"#))
        XCTAssertFalse(page.body.contains("http://") || page.body.contains("https://"), "nothing from elsewhere")
        let pageHeaders = readText(headers).lowercased()
        XCTAssertTrue(pageHeaders.contains("content-type: text/html; charset=utf-8"), pageHeaders)
        XCTAssertTrue(pageHeaders.contains("content-security-policy: default-src 'none'; script-src 'self';"), pageHeaders)
        XCTAssertTrue(pageHeaders.contains("x-content-type-options: nosniff"), pageHeaders)
        for (file, type) in [("status.css", "text/css"), ("status.js", "text/javascript")] {
            let answer = try curl("http://127.0.0.1:\(port)/\(file)", ["-D", headers])
            XCTAssertEqual(answer.status, 200, file)
            XCTAssertTrue(readText(headers).contains("Content-Type: \(type); charset=utf-8"), readText(headers))
            XCTAssertGreaterThan(answer.body.count, 1000, file)
        }
        XCTAssertFalse(try curl("http://127.0.0.1:\(port)/status.js").body.contains("innerHTML"), "the script never parses data as markup")
        _ = try curl("http://127.0.0.1:\(port)/status.json", ["-D", headers])
        XCTAssertTrue(readText(headers).contains("Cache-Control: no-store"), readText(headers))
        let peer = try HTTPConnectionPeer(port: port)
        peer.send("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = try XCTUnwrap(peer.response(head: true))
        XCTAssertEqual(head.header("Content-Length"), String(page.body.utf8.count))

        let metrics = try scrape(port)
        XCTAssertEqual(metrics[#"lookupd_http_requests_total{endpoint="/",code="200"}"#], 5, "/, the two files, the script again, HEAD /")
        XCTAssertGreaterThanOrEqual(metrics[#"lookupd_http_requests_total{endpoint="/status.json",code="200"}"#], 6)
    }

    /// At log-level = notice only blocked calls are in the decision log, so
    /// only they are listed (and the document says so); the list keeps the
    /// last 50; log-format = json lines read the same.
    func testRecentCallsFollowTheDecisionLog() throws {
        let (daemon, port) = try startHTTPDaemon(["log-level = notice", "log-format = json"])
        let udp = try UDPPeer()
        for i in 0..<55 {
            XCTAssertEqual(udp.exchange(invite(from: "\"Caller \(i)\" <sip:\(Caller.fraud)@pbx.example>", port: daemon.port,
                                               callID: "blocked-\(i)@pbx"), port: daemon.port)?.statusCode, 603)
        }
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.pizza)@pbx.example>", port: daemon.port, callID: "pizza@pbx"),
                                    port: daemon.port)?.statusCode, 302)
        XCTAssertTrue(try eventually(timeout: 5) {
            let calls = (try statusDocument(port).object["recent"] as? [String: Any])?["calls"] as? [[String: Any]]
            return calls?.first?["call-id"] as? String == "blocked-54@pbx"
        })
        let document = try statusDocument(port).object
        let recent = try XCTUnwrap(document["recent"] as? [String: Any])
        XCTAssertEqual(recent["logged"] as? [String], ["blocked"])
        let calls = try XCTUnwrap(recent["calls"] as? [[String: Any]])
        XCTAssertEqual(calls.map { $0["call-id"] as? String }, (5..<55).reversed().map { "blocked-\($0)@pbx" }, "the last 50, newest first")
        XCTAssertEqual(calls.first?["display-name"] as? String, "Caller 54")
        XCTAssertEqual(calls.first?["response"] as? Int, 603)
        XCTAssertEqual(calls.first?["label"] as? String, "Fraud Risk")
        let totals = try XCTUnwrap(document["totals"] as? [Int])
        XCTAssertEqual(Array(totals.prefix(2)), [55, 1], "counted whatever the log holds")

        // With a log file, identified calls are in the decision log whatever the level.
        let (withFile, filePort) = try startHTTPDaemon(["log-level = warning", "log-file = \(path("decisions.log"))"], name: "file")
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.pizza)@pbx.example>", port: withFile.port), port: withFile.port)?.statusCode, 302)
        XCTAssertTrue(try eventually(timeout: 5) {
            ((try statusDocument(filePort).object["recent"] as? [String: Any])?["calls"] as? [Any])?.count == 1
        })
        let fileRecent = try XCTUnwrap(try statusDocument(filePort).object["recent"] as? [String: Any])
        XCTAssertEqual(fileRecent["logged"] as? [String], ["blocked", "identified"])
        XCTAssertEqual((fileRecent["calls"] as? [[String: Any]])?.map { $0["caller"] as? String }, [Caller.pizza])
    }

    /// The page and its document are for http-allow-from only: anyone else
    /// learns nothing from any of its paths.
    func testNothingForAddressesOutsideHTTPAllowFrom() throws {
        try compile(Hostile.feedCSV, to: "feed.lkd")
        let (daemon, port) = try startHTTPDaemon(["http-allow-from = 127.0.0.2/32"], directories: statusDirectories)
        try placeKnownCalls(port: daemon.port)
        for path in ["/", "/status.json", "/status.js", "/status.css"] {
            let outsider = try HTTPConnectionPeer(port: port, from: "127.0.0.1")
            outsider.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
            if let answer = outsider.response() {
                XCTAssertEqual(answer.status, 403, path)
                XCTAssertEqual(answer.text, "source address not allowed (http-allow-from)\n", "\(path): nothing but the refusal")
            }
            XCTAssertTrue(outsider.closes(), "\(path): the connection is closed")
        }
        let allowed = try HTTPConnectionPeer(port: port, from: "127.0.0.2")
        allowed.send("GET /status.json HTTP/1.1\r\nHost: x\r\n\r\n")
        let answer = try XCTUnwrap(allowed.response())
        XCTAssertEqual(answer.status, 200)
        XCTAssertTrue(answer.text.contains(Caller.fraud), "the allowed address sees the calls")
    }

    /// The page in headless Chromium against a daemon with known traffic:
    /// the counts it shows, a lookup through its search box, a block through
    /// its form (refused with a wrong token, then answered 6xx for by the
    /// daemon), hostile text shown as text, a phone-width layout without
    /// sideways scrolling, and screenshots. LOOKUPD_UPDATE_SCREENSHOTS=1 writes them into docs/images
    /// (with the fingerprint of the page they show); otherwise the test
    /// fails when the page changed since they were taken.
    func testStatusPageInChromium() throws {
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver", "/usr/bin/python3"] {
            guard FileManager.default.isExecutableFile(atPath: tool) else {
                XCTFail("\(tool) is missing: scripts/install-deps installs chromium, chromium-driver and python3-selenium")
                return
            }
        }
        let update = ProcessInfo.processInfo.environment["LOOKUPD_UPDATE_SCREENSHOTS"] == "1"
        try compile(Hostile.feedCSV, to: "feed.lkd")
        let token = "browser-token-\(getpid())"
        write("write.token", token + "\n")
        let (daemon, port) = try startHTTPDaemon(["http-write-token-file = write.token"], directories: statusDirectories)
        let formNumber = "+8613000000077"
        let udp = try UDPPeer()
        func answer(_ number: String) -> Int? {
            udp.exchange(invite(from: "<sip:\(number)@pbx.example>", to: "1001", port: daemon.port), port: daemon.port)?.statusCode
        }
        XCTAssertEqual(answer(formNumber), 302, "not blocked before the form")
        // For the pictures in the README, calls over a few minutes; the test itself needs one round.
        let rounds = update ? 4 : 1
        var expected: [String: Int] = [:]
        for round in 0..<rounds {
            if round > 0 { sleep(UInt32(61 - time(nil) % 60)) }
            for (verdict, n) in try placeKnownCalls(port: daemon.port) { expected[verdict, default: 0] += n }
        }
        XCTAssertEqual(try lookupd(["add", "+8613000000099", "--block", "--label", "Late Addition", "--config", daemon.configPath]).status, 0)
        XCTAssertTrue(try eventually(timeout: 10) {
            let document = try statusDocument(port).object
            let main = (document["directories"] as? [[String: Any]])?.first
            let calls = (document["recent"] as? [String: Any])?["calls"] as? [Any]
            return (main?["journal"] as? [String: Any])?["entries"] as? Int == 1 && calls?.count == 6 * rounds
                && (document["totals"] as? [Int])?.reduce(0, +) == 10 * rounds + 1
        }, "the journal entry and the calls are in force before the browser looks")

        let images = PackageTests.repository + "/docs/images"
        let shots = update ? images : path("screenshots")
        var arguments = [fixturesDirectory.appendingPathComponent("browser/status-page.py").path,
                         "--url", "http://127.0.0.1:\(port)/", "--number", Hostile.number, "--screenshots", shots,
                         "--fingerprint", images + "/status-page.sha256", "--token", token, "--block", formNumber, "--expires", "1h"]
        if update { arguments.append("--update") }
        let run = try runCommand("/usr/bin/python3", arguments, folder: folder, timeout: 120)
        XCTAssertEqual(run.status, 0, run.summary)
        let seen = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], run.summary)

        for layout in ["desktop", "phone"] {
            let view = try XCTUnwrap(seen[layout] as? [String: Any], layout)
            var hour = expected
            hour["unknown", default: 0] += 1 // the form's number, before it was blocked
            XCTAssertEqual(view["totals"] as? [String: String], hour.mapValues(String.init), "\(layout): calls in the last hour")
            XCTAssertEqual(view["injected"] as? Int, 0, "\(layout): no markup from the data became an element")
            XCTAssertEqual(view["pwned"] as? Bool, false, "\(layout): no script from the data ran")
            XCTAssertEqual(view["console"] as? [String], [], "\(layout): no script error, no policy violation")
            XCTAssertTrue(view["problem"] is NSNull, "\(layout): \(view["problem"] ?? "")")
            XCTAssertEqual(view["scripts"] as? [String], ["status.js"])
            XCTAssertGreaterThan(view["bars"] as? Int ?? 0, 0, "\(layout): the chart has bars")
            let recent = try XCTUnwrap(view["recent"] as? [[String: String]])
            XCTAssertEqual(recent.count, 6 * rounds, layout)
            XCTAssertEqual(recent.first?["caller"], Caller.blockedUnlabelled)
            XCTAssertEqual(recent.last?["display-name"], Hostile.displayName, "\(layout): shown as the caller sent it")
            XCTAssertEqual(recent.first { $0["caller"] == Hostile.number }?["label"], Hostile.label, "\(layout): the label as the feed has it")
            let directories = try XCTUnwrap(view["directories"] as? [[String: String]])
            XCTAssertEqual(directories.map { $0["name"] }, ["main", "feed"])
            // The phone loads the page after the form added its block.
            let inForce = layout == "desktop" ? "1 in force" : "2 in force"
            XCTAssertTrue(directories[0]["journal"]?.contains(inForce) == true, "\(layout): \(directories)")
            let screenshot = try XCTUnwrap(view["screenshot"] as? String)
            let png = try XCTUnwrap(FileManager.default.contents(atPath: screenshot), screenshot)
            XCTAssertEqual(Array(png.prefix(8)), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "\(screenshot) is a PNG")
            let width = png.count > 24 ? png[16..<20].reduce(0) { $0 << 8 | Int($1) } : 0
            XCTAssertEqual(width, layout == "desktop" ? 1280 : 780, "\(layout) screenshot width")
        }
        let phone = try XCTUnwrap(seen["phone"] as? [String: Any])
        XCTAssertEqual(phone["viewport"] as? Int, 390)
        XCTAssertLessThanOrEqual(phone["widest"] as? Int ?? .max, 390, "nothing wider than a phone's screen")

        let lookup = try XCTUnwrap(seen["lookup"] as? [String: String])
        XCTAssertEqual(lookup["verdict"], "blocked", "\(lookup)")
        XCTAssertEqual(lookup["label"], Hostile.label)
        XCTAssertEqual(lookup["source"], "feed")
        XCTAssertEqual(lookup["number"], Hostile.number)

        // The form: a wrong token's 401 shown, then the block written, and the daemon refuses the number.
        let form = try XCTUnwrap(seen["form"] as? [String: Any], run.summary)
        let wrong = try XCTUnwrap(form["wrong"] as? [String: String])
        XCTAssertEqual(wrong["status"], "401 Unauthorized", "\(wrong)")
        XCTAssertEqual(wrong["message"], "a valid bearer token is required (Authorization: Bearer TOKEN)", "\(wrong)")
        let right = try XCTUnwrap(form["right"] as? [String: String])
        XCTAssertEqual(right["status"], "201 Created", "\(right)")
        let message = try XCTUnwrap(right["message"])
        XCTAssertTrue(message.hasPrefix("\(formNumber): added (block until ") && message.contains(") in main, journal record 2"), message)
        XCTAssertEqual(right["state"], "A token is held in this page's memory.")
        XCTAssertEqual(form["traces"] as? [String], [], "the token is nowhere but in the script's memory")
        let formConsole = try XCTUnwrap(form["console"] as? [String])
        XCTAssertEqual(formConsole.count, 1, "\(formConsole)")
        XCTAssertTrue(formConsole.allSatisfy { $0.contains("v1/entries") && $0.contains("401") }, "only the refused request: \(formConsole)")
        XCTAssertTrue(try eventually(timeout: 5) { answer(formNumber) == 603 }, "the daemon blocks the number the form blocked")
        let stored = try curl("http://127.0.0.1:\(port)/v1/entries/\(formNumber)", ["-H", "Authorization: Bearer \(token)"])
        XCTAssertEqual(stored.status, 200, stored.body)
        let holding = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(stored.body.utf8)) as? [String: Any], stored.body)
        let mainEntry = ((holding["directories"] as? [[String: Any]])?.first { $0["directory"] as? String == "main" })?["entry"] as? [String: Any]
        XCTAssertEqual(mainEntry?["action"] as? String, "block", stored.body)
        let seconds = (mainEntry?["expires"] as? Int ?? 0) - Int(time(nil))
        XCTAssertTrue((3300...3600).contains(seconds), "the form's 1h expiry is stored: \(stored.body)")

        let fingerprint = try XCTUnwrap(seen["fingerprint"] as? [String: String])
        XCTAssertEqual(fingerprint["served"], fingerprint["recorded"],
                       "the page changed since the screenshots in docs/images were taken: take them again with "
                       + "LOOKUPD_UPDATE_SCREENSHOTS=1 swift test --filter StatusPageTests/testStatusPageInChromium")
    }
}
