import Configuration
import Directory
import FeedRecords
import TextFormats
import Foundation
import XCTest

/// Feeds pointed at a new URL, and feeds whose lists need their columns named.
final class FeedSourceTests: FeedTestCase {
    static let oldList = "number,action,label\n+8613800138000,block,Old Spam\n"
    static let newList = "number,action,label\n+8613800138000,block,New Spam\n+8613000000001,block,New Spam\n"

    /// A publisher (or a cache in front of it) that answers 304 to any
    /// If-Modified-Since: validators sent to the new URL would keep its
    /// list out for good. They belong to the URL they came from.
    func testAChangedURLIsDownloadedFresh() throws {
        server.publish("old.csv", Self.oldList)
        server.publish("new.csv", Self.newList)
        let target = path("spam.lkd")
        var config = try self.config(["spamco \(server.url("lazy/old.csv")) into=\(target)"])
        XCTAssertTrue(try update(config).succeeded, "\(errors)")
        XCTAssertEqual(try entries(target), ["+8613800138000 block Old Spam"])
        XCTAssertEqual(record("spamco")?.validatorsURL, server.url("lazy/old.csv"))
        XCTAssertFalse(record("spamco")?.lastModified.isEmpty ?? true)

        // Unchanged URL: a conditional request, and the lazy server's 304.
        server.clearLog()
        XCTAssertEqual(try update(config).unchanged, ["spamco"])
        XCTAssertEqual(server.requests.map(\.status), [304])

        // The operator points the feed elsewhere.
        config = try self.config(["spamco \(server.url("lazy/new.csv")) into=\(target)"])
        server.clearLog()
        let moved = try update(config)
        XCTAssertTrue(moved.succeeded, "\(errors)")
        XCTAssertEqual(moved.installed, [target])
        let requests = server.requests
        XCTAssertEqual(requests.count, 1)
        XCTAssertNil(requests.first?.ifModifiedSince, "no validators from the old URL")
        XCTAssertNil(requests.first?.ifNoneMatch)
        XCTAssertEqual(requests.first?.status, 200)
        XCTAssertEqual(try entries(target), ["+8613000000001 block New Spam", "+8613800138000 block New Spam"])
        XCTAssertEqual(record("spamco")?.validatorsURL, server.url("lazy/new.csv"))
        XCTAssertTrue(logs.contains { $0.1.contains("spamco: URL changed since the last download; fetching it anew") }, "\(logs)")

        // From then on the new URL's validators are used.
        server.clearLog()
        XCTAssertEqual(try update(config).unchanged, ["spamco"])
        XCTAssertNotNil(server.requests.first?.ifModifiedSince)
    }

    /// A state file written before validators named their URL: they are
    /// taken as the previous URL's, so a moved feed still starts fresh.
    func testOldStateFilesAreReadAsTheOldURLs() throws {
        server.publish("old.csv", Self.oldList)
        server.publish("new.csv", Self.newList)
        let target = path("spam.lkd")
        XCTAssertTrue(try update(try config(["spamco \(server.url("lazy/old.csv")) into=\(target)"])).succeeded, "\(errors)")
        let statePath = path("state/feeds/spamco.state")
        let state = try String(contentsOfFile: statePath, encoding: .utf8)
        let old = state.split(separator: "\n").filter { !$0.hasPrefix("validators-url") }.joined(separator: "\n") + "\n"
        try old.write(toFile: statePath, atomically: true, encoding: .utf8)
        XCTAssertEqual(record("spamco")?.validatorsURL, "")

        server.clearLog()
        let moved = try update(try config(["spamco \(server.url("lazy/new.csv")) into=\(target)"]))
        XCTAssertEqual(moved.installed, [target], "\(errors)")
        XCTAssertNil(server.requests.first?.ifModifiedSince)
    }

    /// A manifest that moved: its version no longer proves the list unchanged.
    func testAChangedManifestURLIsFetchedFresh() throws {
        server.publish("a.json", "{\"version\": \"7\"}")
        server.publish("b.json", "{\"version\": \"7\"}")
        server.publish("list.csv", Self.oldList)
        server.publish("list2.csv", Self.newList)
        let target = path("spam.lkd")
        XCTAssertTrue(try update(try config(["spamco \(server.url("f/list.csv")) manifest=\(server.url("lazy/a.json")) into=\(target)"])).succeeded)
        let moved = try update(try config(["spamco \(server.url("f/list2.csv")) manifest=\(server.url("lazy/b.json")) into=\(target)"]))
        XCTAssertEqual(moved.installed, [target], "\(errors)")
        XCTAssertEqual(try entries(target).count, 2)
    }

    /// Column options on the feed line, and recognised exports as feeds.
    func testFeedColumnOptions() throws {
        server.publish("complaints.csv", """
        Phone,Reported,Category
        800 555 0143,2024-06-03,Robocall
        ,2024-06-03,Other
        555 01,2024-06-03,Other
        212 555 0187,2024-06-03,Debt relief

        """)
        server.publish("blacklist.csv", "number,description\n4155550123,Robo caller\n")
        let one = path("one.lkd"), two = path("two.lkd")
        let config = try self.config([
            "complaints \(server.url("f/complaints.csv")) into=\(one) number-column=Phone label-column=3 action=block skip-invalid=yes",
            "pbx \(server.url("f/blacklist.csv")) into=\(two)",
        ], extra: ["country-code = 1"])
        XCTAssertEqual(config.feeds[0].source.columns, CSVColumnMapping(number: .name("Phone"), label: .index(3)))
        XCTAssertEqual(config.feeds[0].source.defaultAction, .block)
        XCTAssertTrue(config.feeds[0].source.skipInvalid)
        let result = try update(config)
        XCTAssertTrue(result.succeeded, "\(errors)")
        XCTAssertEqual(try entries(one), ["+12125550187 block Debt relief", "+18005550143 block Robocall"])
        XCTAssertEqual(try entries(two), ["+14155550123 block Robo caller"], "FreePBX's export blocks every row")
        // A row without a number is no error in an export; a bad number is, skipped.
        XCTAssertTrue(logs.contains { $0.0 == .warning && $0.1.contains("complaints: complaints:complaints.csv:4: skipped: ") }, "\(logs)")
        XCTAssertFalse(logs.contains { $0.1.contains("complaints.csv:3") }, "\(logs)")
        XCTAssertEqual(record("complaints")?.entries, 2)

        XCTAssertThrowsError(try self.config(["x \(server.url("f/a.csv")) label-column=2"])) { error in
            XCTAssertTrue("\(error)".contains("name the number column too"), "\(error)")
        }
        XCTAssertThrowsError(try self.config(["x \(server.url("f/a.csv")) number-column=1 header=maybe"])) { error in
            XCTAssertTrue("\(error)".contains("header= expects yes or no"), "\(error)")
        }
        XCTAssertThrowsError(try self.config(["x \(server.url("f/a.csv")) action=unblock"])) { error in
            XCTAssertTrue("\(error)".contains("action= must be block, identify or allow"), "\(error)")
        }
    }
}
