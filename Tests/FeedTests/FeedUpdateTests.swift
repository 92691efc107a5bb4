import Configuration
import Directory
import Feeds
import FeedRecords
import Foundation
import XCTest

/// `lookupd update` through the library against the local feed server: plain, gzip and zip
/// feeds, conditional requests, manifests, checksums, and every way a download can be bad.
/// Whatever goes wrong, the directory in force must stay byte for byte as it was.
final class FeedUpdateTests: FeedTestCase {
    static let listV1 = """
    number,action,label
    +8613800138000,block,Fraud
    +8618600000000,identify,China Unicom
    +86170*,block,Virtual Range

    """

    static let listV2 = listV1 + "+8613000000001,block,New Spam\n"

    // MARK: Plain, conditional requests

    func testPlainFeedInstallsThenAnUnchangedFeedCostsOneSmallRequest() throws {
        server.publish("spam.csv", Self.listV1)
        let target = path("spam.lkd")
        let config = try config(["spamco \(server.url("f/spam.csv")) into=\(target)"])

        let first = try update(config)
        XCTAssertTrue(first.succeeded, "\(errors)")
        XCTAssertEqual(first.installed, [target])
        XCTAssertEqual(reloads, 1)
        XCTAssertEqual(try entries(target).count, 3)
        let installed = try XCTUnwrap(record("spamco"))
        XCTAssertEqual(installed.entries, 3)
        XCTAssertEqual(installed.url, server.url("f/spam.csv"))
        XCTAssertEqual(installed.into, target)
        XCTAssertFalse(installed.etag.isEmpty)
        XCTAssertFalse(installed.lastModified.isEmpty)
        XCTAssertEqual(installed.version.count, 14, "no manifest: the version is the install time, YYYYMMDDhhmmss")
        XCTAssertEqual(try header(target).directoryVersion, UInt64(installed.version), "one feed with a numeric version: it is the directory version")
        XCTAssertTrue(installed.error.isEmpty)

        let before = identity(target)
        let stateBefore = try String(contentsOfFile: path("state/feeds/spamco.data"), encoding: .utf8)
        server.clearLog()
        let second = try update(config)
        XCTAssertTrue(second.succeeded, "\(errors)")
        XCTAssertEqual(second.installed, [])
        XCTAssertEqual(second.unchanged, ["spamco"])
        XCTAssertEqual(reloads, 1, "nothing installed, no reload")
        XCTAssertEqual(identity(target), before, "the directory file was not touched")
        XCTAssertEqual(try String(contentsOfFile: path("state/feeds/spamco.data"), encoding: .utf8), stateBefore)
        let requests = server.requests
        XCTAssertEqual(requests.count, 1, "one request: \(requests)")
        XCTAssertEqual(requests.first?.status, 304)
        XCTAssertEqual(requests.first?.ifNoneMatch, installed.etag)
        XCTAssertEqual(requests.first?.ifModifiedSince, installed.lastModified)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target + ".previous"), "nothing replaced yet")

        // A new version is installed; the old file is kept for rollback.
        server.publish("spam.csv", Self.listV2)
        let third = try update(config)
        XCTAssertTrue(third.succeeded, "\(errors)")
        XCTAssertEqual(try entries(target).count, 4)
        XCTAssertEqual(try entries(target + ".previous").count, 3)
        XCTAssertEqual(record("spamco")?.entries, 4)
        XCTAssertEqual(record("spamco")?.previousEntries, 3)
        XCTAssertEqual(reloads, 2)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target + ".new"))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: path("state/feeds")).filter { $0.hasPrefix(".work") }
        XCTAssertEqual(leftovers, [], "the work folder is removed")
    }

    /// D18: a feed whose list holds a label with a backslash installs, with a warning naming
    /// the label and label-escapes.
    func testABackslashLabelIsWarnedAbout() throws {
        server.publish("spam.csv", "number,action,label\n+8613800138000,block,Evil\\Corp\n")
        let target = path("spam.lkd")
        let result = try update(try config(["spamco \(server.url("f/spam.csv")) into=\(target)"]))
        XCTAssertTrue(result.succeeded, "\(errors)")
        XCTAssertTrue(logs.contains { $0.0 == .warning && $0.1.contains("1 label holds a backslash (\"Evil\\Corp\")") && $0.1.contains("label-escapes") },
                      "\(logs)")
    }

    func testServerWithoutValidatorsServingTheSameBytesChangesNothing() throws {
        server.publish("spam.csv", Self.listV1)
        let target = path("spam.lkd")
        let config = try config(["spamco \(server.url("plain/spam.csv")) into=\(target)"])
        XCTAssertTrue(try update(config).succeeded, "\(errors)")
        let before = identity(target)
        let again = try update(config)
        XCTAssertEqual(again.unchanged, ["spamco"])
        XCTAssertEqual(again.installed, [])
        XCTAssertEqual(identity(target), before)
        XCTAssertTrue(logs.contains { $0.1.contains("same content as the last download") }, "\(logs)")
    }

    func testForceReinstallsAnUnchangedFeed() throws {
        server.publish("spam.csv", Self.listV1)
        let target = path("spam.lkd")
        let config = try config(["spamco \(server.url("f/spam.csv")) into=\(target)"])
        XCTAssertTrue(try update(config).succeeded)
        server.clearLog()
        let forced = try update(config, force: true)
        XCTAssertEqual(forced.installed, [target])
        XCTAssertNil(server.requests.first?.ifNoneMatch, "--force sends no validators")
        XCTAssertEqual(try entries(target).count, 3)
    }

    /// A new target is written in the default format; a file the operator compiled with
    /// `--file-format 2` (a fleet with older readers) stays in binary order at every update,
    /// as compaction keeps it: an update must not take the file away from those readers.
    func testAnUpdateKeepsTheKeyOrderOfTheInstalledFile() throws {
        server.publish("spam.csv", Self.listV1)
        let target = path("spam.lkd")
        let config = try config(["spamco \(server.url("f/spam.csv")) into=\(target)"])
        XCTAssertTrue(try update(config).succeeded, "\(errors)")
        XCTAssertEqual(try header(target).formatVersion, DirectoryFormat.version)

        var older = DirectoryContent()
        older.exactKeys = [8613800000001]
        older.exactValues = [DirectoryFormat.encodeValue(blocked: true, label: nil)]
        try DirectoryWriter.write(older, to: target, formatVersion: 2)
        server.publish("spam.csv", Self.listV2)
        XCTAssertTrue(try update(config).succeeded, "\(errors)")
        XCTAssertEqual(try header(target).formatVersion, 2, "the installed file was binary order")
        XCTAssertEqual(try entries(target).count, 4)
        let lines = try entries(target)
        XCTAssertTrue(lines.contains("+8613000000001 block New Spam"), "\(lines)")

        // An allow entry makes it version 3, still binary order.
        server.publish("spam.csv", Self.listV2 + "+8613000000002,allow,Hospital\n")
        XCTAssertTrue(try update(config).succeeded, "\(errors)")
        XCTAssertEqual(try header(target).formatVersion, DirectoryFormat.allowVersion)
        XCTAssertEqual(try entries(target).count, 5)
    }

    /// A target that cannot be read has no key order to keep: it is rebuilt in today's format
    /// from the feed, and the operator is told, since an older reader refuses that format.
    func testAnUnreadableInstalledFileIsRebuiltInTodaysFormatAndSaidSo() throws {
        server.publish("spam.csv", Self.listV1)
        let target = path("spam.lkd")
        let config = try config(["spamco \(server.url("f/spam.csv")) into=\(target)"])
        XCTAssertTrue(try update(config).succeeded, "\(errors)")
        XCTAssertFalse(logs.contains { $0.1.contains("gives no format to keep") }, "a readable file is no reason to warn: \(logs)")

        try Data("number,action\n+8613800000001,block\n".utf8).write(to: URL(fileURLWithPath: target))
        server.publish("spam.csv", Self.listV2)
        XCTAssertTrue(try update(config).succeeded, "\(errors)")
        XCTAssertEqual(try header(target).formatVersion, DirectoryFormat.version)
        XCTAssertEqual(try entries(target).count, 4)
        let warning = logs.first { $0.0 == .warning && $0.1.contains("gives no format to keep") }
        XCTAssertNotNil(warning, "\(logs)")
        XCTAssertTrue(warning?.1.contains(target) ?? false, "\(logs)")
        XCTAssertTrue(warning?.1.contains("format \(DirectoryFormat.version)") ?? false, "\(logs)")
    }

    func testRedirectIsFollowed() throws {
        server.publish("spam.csv", Self.listV1)
        let config = try config(["spamco \(server.url("redirect/spam.csv")) format=csv into=\(path("spam.lkd"))"])
        XCTAssertTrue(try update(config).succeeded, "\(errors)")
        XCTAssertEqual(try entries(path("spam.lkd")).count, 3)
    }

    // MARK: Formats and archives

    func testGzipFeed() throws {
        let source = write("list.csv", Self.listV2)
        try pack(["gzip", source, server.root + "/spam.csv.gz"])
        let target = path("spam.lkd")
        let config = try config(["spamco \(server.url("f/spam.csv.gz")) into=\(target)"])
        let result = try update(config)
        XCTAssertTrue(result.succeeded, "\(errors)")
        XCTAssertEqual(try entries(target).count, 4)
        XCTAssertTrue(try entries(target).contains("+8613000000001 block New Spam"))
    }

    func testZipFeedWithSeveralMembersAndPlainTextAndJSON() throws {
        let csv = write("a.csv", Self.listV1)
        let json = write("b.json", #"[{"phoneNum": "+8613911112222", "typeName": "Delivery"}, {"number": "+8613800138000", "action": "identify", "label": "Not Fraud"}]"#)
        let text = write("c.txt", "# blocked\n+8613555550000\n")
        let readme = write("README", "not a list\n")
        try pack(["zip", server.root + "/lists.zip", "spam/a.csv=\(csv)", "b.json=\(json)", "c.txt=\(text)", "README=\(readme)", "dir/=\(readme)"])
        let target = path("spam.lkd")
        let config = try config(["spamco \(server.url("f/lists.zip")) into=\(target)"])
        let result = try update(config)
        XCTAssertTrue(result.succeeded, "\(errors)")
        let all = try entries(target)
        XCTAssertEqual(all.count, 5, "\(all)")
        // +8613800138000 is in a.csv and b.json: the first member read wins.
        XCTAssertTrue(all.contains("+8613800138000 block Fraud"), "\(all)")
        XCTAssertTrue(all.contains("+8613911112222 identify Delivery"))
        XCTAssertTrue(all.contains("+8613555550000 block "))
        XCTAssertEqual(record("spamco")?.entries, 6, "entries counts every list line read")
        XCTAssertTrue(logs.contains { $0.1.contains("archive members not read: README") }, "\(logs)")
    }

    func testZipMembersOptionSelectsAndOrders() throws {
        let a = write("a.csv", "number,action,label\n+8613800138000,block,From A\n")
        let b = write("b.csv", "number,action,label\n+8613800138000,identify,From B\n")
        try pack(["zip", server.root + "/lists.zip", "a.csv=\(a)", "b.csv=\(b)"])
        let target = path("spam.lkd")
        let config = try config(["spamco \(server.url("f/lists.zip")) members=b.csv,a.csv into=\(target)"])
        XCTAssertTrue(try update(config).succeeded, "\(errors)")
        XCTAssertEqual(try entries(target), ["+8613800138000 identify From B"])

        let missing = try self.config(["other \(server.url("f/lists.zip")) members=c.csv into=\(path("other.lkd"))"])
        XCTAssertFalse(try update(missing).succeeded)
        XCTAssertTrue(errors.last?.contains("has no member 'c.csv'") ?? false, "\(errors)")
    }

    func testFormatOptionForAnUnnamedList() throws {
        server.publish("download", "+8613800138000\n+8613800138001\n")
        let noFormat = try config(["spamco \(server.url("f/download")) into=\(path("spam.lkd"))"])
        XCTAssertFalse(try update(noFormat).succeeded)
        XCTAssertTrue(errors.last?.contains("format=") ?? false, "\(errors)")
        let withFormat = try config(["spamco \(server.url("f/download")) format=text into=\(path("spam.lkd"))"])
        XCTAssertTrue(try update(withFormat).succeeded, "\(errors)")
        XCTAssertEqual(try entries(path("spam.lkd")).count, 2)
    }

    // MARK: Manifests and checksums

    func manifest(version: String, for data: Data, count: Int, sha: String? = nil, size: Int? = nil) -> String {
        let digest = sha ?? sha256Hex(data)
        return #"{"version": "\#(version)", "size": \#(size ?? data.count), "count": \#(count), "sha256": "\#(digest)", "publisher": "test"}"#
    }

    func testManifestIsCheckedAndAnUnchangedManifestSkipsTheList() throws {
        let v1 = Data(Self.listV1.utf8)
        server.publish("spam.csv", v1)
        server.publish("spam.json", manifest(version: "41", for: v1, count: 3))
        let target = path("spam.lkd")
        let config = try config(["spamco \(server.url("f/spam.csv")) manifest=\(server.url("f/spam.json")) into=\(target)"])
        XCTAssertTrue(try update(config).succeeded, "\(errors)")
        XCTAssertEqual(record("spamco")?.version, "41")
        XCTAssertEqual(try header(target).directoryVersion, 41)

        server.clearLog()
        let again = try update(config)
        XCTAssertEqual(again.unchanged, ["spamco"])
        XCTAssertEqual(server.requests.map(\.path), ["/f/spam.json"], "only the manifest is asked for")
        XCTAssertEqual(server.requests.first?.status, 304)

        // The manifest changes but the list does not match it: refused, the old list stays.
        let v2 = Data(Self.listV2.utf8)
        let before = identity(target)
        server.publish("spam.json", manifest(version: "42", for: v2, count: 4))
        let mismatch = try update(config)
        XCTAssertEqual(mismatch.failed, ["spamco"])
        XCTAssertTrue(errors.last?.contains("sha256 mismatch") ?? false, "\(errors)")
        XCTAssertTrue(errors.last?.contains("keeps its current list") ?? false)
        XCTAssertEqual(identity(target), before)
        XCTAssertEqual(record("spamco")?.version, "41")
        XCTAssertFalse(record("spamco")?.error.isEmpty ?? true)

        // The list arrives: installed as version 42.
        server.publish("spam.csv", v2)
        let fixed = try update(config)
        XCTAssertTrue(fixed.succeeded, "\(errors)")
        XCTAssertEqual(record("spamco")?.version, "42")
        XCTAssertEqual(try header(target).directoryVersion, 42)
        XCTAssertEqual(record("spamco")?.error, "")

        // A manifest with the same version and a new ETag: still nothing to download.
        server.publish("spam.json", manifest(version: "42", for: v2, count: 4) + " ")
        server.clearLog()
        XCTAssertEqual(try update(config).unchanged, ["spamco"])
        XCTAssertEqual(server.requests.map(\.path), ["/f/spam.json"])
    }

    func testManifestCountAndSizeMismatchesAreRefused() throws {
        let v1 = Data(Self.listV1.utf8)
        server.publish("spam.csv", v1)
        server.publish("count.json", manifest(version: "1", for: v1, count: 30))
        server.publish("size.json", #"{"size": 5}"#)
        server.publish("junk.json", "{not json")
        server.publish("empty.json", #"{"note": "nothing useful"}"#)
        for (name, expected) in [("count.json", "entry count mismatch"), ("size.json", "size mismatch"),
                                 ("junk.json", "not valid JSON"), ("empty.json", "names none of")] {
            logs = []
            let config = try config(["spamco \(server.url("f/spam.csv")) manifest=\(server.url("f/" + name)) into=\(path(name + ".lkd"))"])
            let result = try update(config)
            XCTAssertEqual(result.failed, ["spamco"], name)
            XCTAssertTrue(errors.joined().contains(expected), "\(name): \(errors)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: path(name + ".lkd")), name)
        }
    }

    func testPinnedSHA256() throws {
        let v1 = Data(Self.listV1.utf8)
        server.publish("spam.csv", v1)
        let good = try config(["spamco \(server.url("f/spam.csv")) sha256=\(sha256Hex(v1).uppercased()) into=\(path("good.lkd"))"])
        XCTAssertTrue(try update(good).succeeded, "\(errors)")
        let bad = try config(["pinned \(server.url("f/spam.csv")) sha256=\(String(repeating: "0", count: 64)) into=\(path("bad.lkd"))"])
        XCTAssertFalse(try update(bad).succeeded)
        XCTAssertTrue(errors.last?.contains("sha256 mismatch") ?? false, "\(errors)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("bad.lkd")))
    }

    // MARK: Bad downloads: the old list stays

    /// Installs version 1, runs `change`, updates, and checks the update failed with
    /// `expected` in its message and left the directory exactly as it was.
    func assertRefused(_ expected: String, feedOptions: String = "", url: String? = nil, file: StaticString = #filePath, line: UInt = #line,
                       _ change: () throws -> Void) throws {
        server.publish("good.csv", Self.listV1)
        let target = path("spam.lkd")
        let good = try config(["spamco \(server.url("f/good.csv")) into=\(target) \(feedOptions)"])
        XCTAssertTrue(try update(good).succeeded, "\(errors)", file: file, line: line)
        let before = identity(target)
        let content = try entries(target)
        try change()
        let bad = try config(["spamco \(url ?? server.url("f/good.csv")) into=\(target) \(feedOptions)"])
        let reloadsBefore = reloads
        let result = try update(bad)
        XCTAssertFalse(result.succeeded, file: file, line: line)
        XCTAssertEqual(result.failed, ["spamco"], file: file, line: line)
        XCTAssertEqual(result.installed, [], file: file, line: line)
        XCTAssertTrue(errors.joined(separator: "\n").contains(expected), "expected '\(expected)' in: \(errors)", file: file, line: line)
        XCTAssertEqual(identity(target), before, "the directory in force was not touched", file: file, line: line)
        XCTAssertEqual(try entries(target), content, file: file, line: line)
        XCTAssertEqual(reloads, reloadsBefore, "no reload after a failure", file: file, line: line)
        XCTAssertEqual(record("spamco")?.entries, 3, file: file, line: line)
        XCTAssertFalse(record("spamco")?.error.isEmpty ?? true, "the failure is recorded", file: file, line: line)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target + ".new"), file: file, line: line)
    }

    func testTruncatedDownloadIsRefused() throws {
        try assertRefused("truncated", url: server.url("truncate/big.csv")) {
            server.publish("big.csv", csvList(2000))
        }
    }

    func testTruncatedGzipIsRefused() throws {
        let source = write("big.csv", csvList(5000))
        try pack(["gzip", source, path("big.csv.gz")])
        try assertRefused("gzip data is truncated", url: server.url("f/cut.csv.gz")) {
            try pack(["truncate", path("big.csv.gz"), server.root + "/cut.csv.gz", "3000"])
        }
    }

    func testCorruptGzipIsRefused() throws {
        let source = write("big.csv", csvList(5000))
        try pack(["gzip", source, path("big.csv.gz")])
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path("big.csv.gz"))))
        for i in stride(from: 200, to: 600, by: 7) { bytes[i] ^= 0x5A }
        try assertRefused("gzip data is corrupt", url: server.url("f/bad.csv.gz")) {
            server.publish("bad.csv.gz", Data(bytes))
        }
    }

    func testTruncatedZipIsRefused() throws {
        let source = write("big.csv", csvList(5000))
        try pack(["zip", path("big.zip"), "big.csv=\(source)"])
        try assertRefused("not a readable zip archive", url: server.url("f/cut.zip")) {
            try pack(["truncate", path("big.zip"), server.root + "/cut.zip", "4000"])
        }
    }

    func testCorruptZipMemberIsRefused() throws {
        let source = write("big.csv", csvList(5000))
        try pack(["zip", path("big.zip"), "big.csv=\(source)"])
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path("big.zip"))))
        for i in stride(from: 300, to: 900, by: 5) { bytes[i] ^= 0xA5 }
        try assertRefused("is damaged", url: server.url("f/bad.zip")) {
            server.publish("bad.zip", Data(bytes))
        }
    }

    func testZipBombIsStoppedWhileInflating() throws {
        try assertRefused("more than max-size=1048576", feedOptions: "max-size=1M", url: server.url("f/bomb.zip")) {
            try pack(["bomb", server.root + "/bomb.zip", "spam.csv", String(64 << 20)])
            XCTAssertLessThan(FileManager.default.sizeOf(server.root + "/bomb.zip"), 200_000)
        }
    }

    func testZipBombWithLyingHeadersIsStoppedWhileInflating() throws {
        try assertRefused("bytes (a compression bomb?)", feedOptions: "max-size=1M", url: server.url("f/liar.zip")) {
            try pack(["bomb", server.root + "/liar.zip", "spam.csv", String(64 << 20), "lie"])
        }
    }

    func testGzipBombIsStoppedWhileInflating() throws {
        _ = FileManager.default.createFile(atPath: path("zeros.csv"), contents: Data(count: 32 << 20))
        try assertRefused("inflates to more than max-size=1048576", feedOptions: "max-size=1M", url: server.url("f/bomb.csv.gz")) {
            try pack(["gzip", path("zeros.csv"), server.root + "/bomb.csv.gz"])
        }
    }

    func testZipMemberClimbingOutIsRefused() throws {
        let source = write("a.csv", Self.listV2)
        try assertRefused("unsafe path '../../etc/a.csv'", url: server.url("f/evil.zip")) {
            try pack(["zip", server.root + "/evil.zip", "ok.csv=\(source)", "../../etc/a.csv=\(source)"])
        }
        try assertRefused("unsafe path '/tmp/a.csv' (absolute path)", url: server.url("f/abs.zip")) {
            try pack(["zip", server.root + "/abs.zip", "/tmp/a.csv=\(source)"])
        }
    }

    func testDownloadLargerThanMaxSizeIsRefused() throws {
        // With Content-Length, refused before the body; chunked, while it streams.
        try assertRefused("larger than max-size=2048", feedOptions: "max-size=2K", url: server.url("f/big.csv")) {
            server.publish("big.csv", csvList(2000))
        }
        try assertRefused("larger than max-size=2048", feedOptions: "max-size=2K", url: server.url("chunked/big.csv")) {}
    }

    func testSlowServerTimesOut() throws {
        let started = Date()
        try assertRefused("timed out after 1 s", feedOptions: "timeout=1", url: server.url("slow/big.csv")) {
            server.publish("big.csv", csvList(200))
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 10)
    }

    func testStalledServerTimesOut() throws {
        try assertRefused("timed out", feedOptions: "timeout=1", url: server.url("stall/big.csv")) {
            server.publish("big.csv", csvList(2000))
        }
    }

    func testHTTPErrorsAndUnreachableServers() throws {
        try assertRefused("HTTP 404", url: server.url("f/missing.csv")) {}
        try assertRefused("HTTP 503", url: server.url("status/503")) {}
        try assertRefused("download failed", url: "http://127.0.0.1:1/spam.csv") {}
    }

    func testInvalidLinesAreRefusedWithTheirLine() throws {
        try assertRefused("spamco:spam2.csv:3: invalid number '1380013800x'", url: server.url("f/spam2.csv")) {
            server.publish("spam2.csv", "number,action,label\n+8613800138000,block,A\n1380013800x,block,B\n")
        }
    }

    func testShrinkBeyondMaxShrinkIsRefusedUntilAllowed() throws {
        server.publish("spam.csv", csvList(100))
        let target = path("spam.lkd")
        let config = try config(["spamco \(server.url("f/spam.csv")) into=\(target) max-shrink=50"])
        XCTAssertTrue(try update(config).succeeded, "\(errors)")
        // -40%: within the bound.
        server.publish("spam.csv", csvList(60))
        XCTAssertTrue(try update(config).succeeded, "\(errors)")
        XCTAssertEqual(record("spamco")?.entries, 60)
        // -90%: refused.
        let before = identity(target)
        server.publish("spam.csv", csvList(6))
        let refused = try update(config)
        XCTAssertEqual(refused.failed, ["spamco"])
        XCTAssertTrue(errors.last?.contains("shrank from 60 to 6 entries (-90%), more than max-shrink=50%") ?? false, "\(errors)")
        XCTAssertEqual(identity(target), before)
        // The same download is refused again next time (it was not accepted as seen)...
        XCTAssertEqual(try update(config).failed, ["spamco"])
        // ...until the operator accepts it.
        let allowed = try update(config, allowShrink: true)
        XCTAssertTrue(allowed.succeeded, "\(errors)")
        XCTAssertEqual(try entries(target).count, 6)
    }

    // MARK: Merging and rollback

    func testMergedFeedsFirstConfiguredWins() throws {
        server.publish("a.csv", "number,action,label\n+8613800138000,block,From A\n+8613800000001,block,Only A\n")
        server.publish("b.csv", "number,action,label\n+8613800138000,identify,From B\n+8613800000002,identify,Only B\n")
        let target = path("spam.lkd")
        let ab = try config(["a \(server.url("f/a.csv")) into=\(target)", "b \(server.url("f/b.csv")) into=\(target)"])
        let result = try update(ab)
        XCTAssertTrue(result.succeeded, "\(errors)")
        XCTAssertEqual(result.installed, [target], "one directory, one install")
        XCTAssertEqual(reloads, 1)
        XCTAssertEqual(try entries(target), ["+8613800000001 block Only A", "+8613800000002 identify Only B", "+8613800138000 block From A"])
        let version = try header(target).directoryVersion
        XCTAssertEqual(String(version).count, 14, "a merged directory's version is the build time")

        // The other order: b wins (a rebuild from the stored downloads, nothing new fetched).
        let ba = try config(["b \(server.url("f/b.csv")) into=\(target)", "a \(server.url("f/a.csv")) into=\(target)"])
        server.clearLog()
        XCTAssertTrue(try update(ba, force: true).succeeded, "\(errors)")
        XCTAssertTrue(try entries(target).contains("+8613800138000 identify From B"))

        // One feed changes, the other answers 304: the merge still holds both.
        server.publish("b.csv", "number,action,label\n+8613800000003,identify,New B\n")
        server.clearLog()
        XCTAssertTrue(try update(ab).succeeded, "\(errors)")
        XCTAssertEqual(Set(server.requests.map(\.status)), [200, 304])
        XCTAssertEqual(try entries(target), ["+8613800000001 block Only A", "+8613800000003 identify New B", "+8613800138000 block From A"])

        // Updating only b still rebuilds from a's stored list.
        server.publish("b.csv", "number,action,label\n+8613800000004,identify,Newer B\n")
        XCTAssertTrue(try update(ab, feeds: ["b"]).succeeded, "\(errors)")
        XCTAssertTrue(try entries(target).contains("+8613800000001 block Only A"))
        XCTAssertTrue(try entries(target).contains("+8613800000004 identify Newer B"))
    }

    func testAFailingFeedDoesNotHoldBackTheOthersInAMerge() throws {
        server.publish("a.csv", "number,action,label\n+8613800000001,block,A\n")
        let target = path("spam.lkd")
        let config = try config(["a \(server.url("f/a.csv")) into=\(target)", "b \(server.url("f/missing.csv")) into=\(target)"])
        let result = try update(config)
        XCTAssertEqual(result.failed, ["b"])
        XCTAssertEqual(result.installed, [target])
        XCTAssertFalse(result.succeeded, "a failed feed makes the run fail")
        XCTAssertEqual(try entries(target), ["+8613800000001 block A"])
        XCTAssertTrue(logs.contains { $0.0 == .warning && $0.1.contains("b: no verified download yet") }, "\(logs)")
        XCTAssertTrue(errors.contains { $0.hasPrefix("b: the server answered HTTP 404") && $0.hasSuffix("\(target) was built without it") }, "\(errors)")

        // Once b has a list, a later failure of b keeps its last list in the merge.
        server.publish("b.csv", "number,action,label\n+8613800000002,identify,B\n")
        let withB = try self.config(["a \(server.url("f/a.csv")) into=\(target)", "b \(server.url("f/b.csv")) into=\(target)"])
        XCTAssertTrue(try update(withB).succeeded, "\(errors)")
        server.publish("a.csv", "number,action,label\n+8613800000009,block,A2\n")
        try FileManager.default.removeItem(atPath: server.root + "/b.csv")
        XCTAssertEqual(try update(withB).failed, ["b"])
        XCTAssertEqual(try entries(target), ["+8613800000002 identify B", "+8613800000009 block A2"])
        XCTAssertTrue(errors.last?.hasSuffix("\(target) was rebuilt with its last verified list") ?? false, "\(errors)")
    }

    func testRollbackSwapsBackAndForth() throws {
        server.publish("spam.csv", Self.listV1)
        let target = path("spam.lkd")
        let config = try config(["spamco \(server.url("f/spam.csv")) into=\(target)"])
        let updater = makeUpdater(config)
        XCTAssertThrowsError(try updater.rollback(feed: "spamco", reload: true)) { error in
            XCTAssertTrue("\(error)".contains("no previous version"), "\(error)")
        }
        XCTAssertTrue(try update(config).succeeded)
        let v1Version = record("spamco")!.version
        server.publish("spam.csv", Self.listV2)
        sleep(1)  // distinct install times
        XCTAssertTrue(try update(config).succeeded)
        XCTAssertEqual(try entries(target).count, 4)

        let rolled = try updater.rollback(feed: "spamco", reload: true)
        XCTAssertEqual(rolled.installed, [target])
        XCTAssertEqual(try entries(target).count, 3)
        XCTAssertEqual(try entries(target + ".previous").count, 4)
        XCTAssertEqual(record("spamco")?.entries, 3)
        XCTAssertEqual(record("spamco")?.version, v1Version)
        XCTAssertGreaterThan(record("spamco")?.rolledBack ?? 0, 0)
        XCTAssertEqual(reloads, 3)

        // The publisher still serves version 2: the rollback holds.
        let after = try update(config)
        XCTAssertEqual(after.unchanged, ["spamco"])
        XCTAssertEqual(try entries(target).count, 3)

        // Rolling back again undoes the rollback.
        _ = try updater.rollback(feed: "spamco", reload: true)
        XCTAssertEqual(try entries(target).count, 4)
        XCTAssertEqual(record("spamco")?.entries, 4)
    }

    func testRollbackRefusesADamagedPreviousVersion() throws {
        server.publish("spam.csv", Self.listV1)
        let target = path("spam.lkd")
        let config = try config(["spamco \(server.url("f/spam.csv")) into=\(target)"])
        XCTAssertTrue(try update(config).succeeded)
        server.publish("spam.csv", Self.listV2)
        XCTAssertTrue(try update(config).succeeded)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: target + ".previous"))
        try handle.seek(toOffset: 300)
        // Not 0xFF: offset 300 may be a padding slot of the last node, whose key is all ones.
        handle.write(Data([0x00, 0x5A, 0x00]))
        try handle.close()
        let before = identity(target)
        XCTAssertThrowsError(try makeUpdater(config).rollback(feed: "spamco", reload: true)) { error in
            XCTAssertTrue("\(error)".contains("previous version is damaged"), "\(error)")
        }
        XCTAssertEqual(identity(target), before)
    }

    func testUnknownFeedAndNoFeeds() throws {
        let none = try config([])
        XCTAssertThrowsError(try update(none)) { XCTAssertTrue("\($0)".contains("no feed is configured"), "\($0)") }
        let one = try config(["spamco \(server.url("f/spam.csv"))"])
        XCTAssertThrowsError(try update(one, feeds: ["other"])) { XCTAssertTrue("\($0)".contains("no feed named 'other'"), "\($0)") }
    }

    func testDefaultTargetIsUnderTheStateDirectory() throws {
        server.publish("spam.csv", Self.listV1)
        let config = try config(["spamco \(server.url("f/spam.csv"))"])
        XCTAssertEqual(config.target(of: config.feeds[0]), path("state/directories/spamco.lkd"))
        XCTAssertTrue(try update(config).succeeded, "\(errors)")
        XCTAssertEqual(try entries(path("state/directories/spamco.lkd")).count, 3)
    }

    func testAnotherUpdateRunningIsRefused() throws {
        server.publish("spam.csv", Self.listV1)
        let config = try config(["spamco \(server.url("f/spam.csv"))"])
        try FileManager.default.createDirectory(atPath: path("state/feeds"), withIntermediateDirectories: true)
        let fd = open(path("state/feeds/update.lock"), O_RDONLY | O_CREAT, 0o640)
        XCTAssertEqual(flock(fd, LOCK_EX), 0)
        defer { close(fd) }
        // flock locks are per open file description: a second open in this process conflicts too.
        XCTAssertThrowsError(try update(config)) { XCTAssertTrue("\($0)".contains("another lookupd update is running"), "\($0)") }
    }
}

extension FileManager {
    func sizeOf(_ path: String) -> Int { (try? attributesOfItem(atPath: path)[.size] as? Int) ?? -1 }
}

/// SHA-256 through the system's sha256sum, independent of the code under test.
func sha256Hex(_ data: Data) -> String {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("sha-\(UUID().uuidString)").path
    _ = FileManager.default.createFile(atPath: file, contents: data)
    defer { try? FileManager.default.removeItem(atPath: file) }
    let result = try? runProgram("/usr/bin/sha256sum", [file])
    return String(result?.stdout.prefix(64) ?? "")
}
