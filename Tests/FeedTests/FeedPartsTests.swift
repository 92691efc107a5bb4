@testable import Configuration
@testable import Feeds
import FeedRecords
import Foundation
import XCTest

/// The pieces without a server: `feed =` parsing, the state file, hashing, manifests and
/// the member-path rules.
final class FeedPartsTests: XCTestCase {
    func parse(_ text: String) throws -> LookupdConfig {
        try ConfigParser.parse(text, path: "/etc/lookupd/lookupd.conf")
    }

    func testFeedLineWithEveryOption() throws {
        let c = try parse("""
        state-directory = /var/lib/lookupd
        feed = spamco https://feeds.example/spam.zip into=spam.lkd format=json compression=zip members=a.json,b.json manifest=https://feeds.example/spam.manifest.json sha256=\(String(repeating: "AB", count: 32)) max-size=200M timeout=60 max-shrink=20%
        feed = community http://lists.example/community.txt.gz
        """)
        XCTAssertEqual(c.feeds.count, 2)
        let f = c.feeds[0]
        XCTAssertEqual(f.name, "spamco")
        XCTAssertEqual(f.url, "https://feeds.example/spam.zip")
        XCTAssertEqual(f.into, "/etc/lookupd/spam.lkd", "relative to the config's folder")
        XCTAssertEqual(f.format, .json)
        XCTAssertEqual(f.compression, .zip)
        XCTAssertEqual(f.members, ["a.json", "b.json"])
        XCTAssertEqual(f.manifest, "https://feeds.example/spam.manifest.json")
        XCTAssertEqual(f.sha256, String(repeating: "ab", count: 32))
        XCTAssertEqual(f.maxSize, 200 << 20)
        XCTAssertEqual(f.timeout, 60)
        XCTAssertEqual(f.maxShrink, 20)
        let d = c.feeds[1]
        XCTAssertNil(d.into)
        XCTAssertEqual(c.target(of: d), "/var/lib/lookupd/directories/community.lkd")
        XCTAssertEqual(d.compression, .auto)
        XCTAssertEqual(d.maxSize, 1 << 30)
        XCTAssertEqual(d.timeout, 300)
        XCTAssertEqual(d.maxShrink, 50)
    }

    func testBadFeedLinesNameTheLine() throws {
        let cases: [(String, String)] = [
            ("feed = spamco", "expected NAME URL"),
            ("feed = ../x https://a.example/x.csv", "feed name '../x'"),
            ("feed = spamco ftp://a.example/x.csv", "not an http:// or https:// URL"),
            ("feed = spamco https:///x.csv", "not an http:// or https:// URL"),
            ("feed = spamco https://a.example/x.csv colour=blue", "unknown feed option 'colour'"),
            ("feed = spamco https://a.example/x.csv format=xml", "format= expected csv, json, text or vcard"),
            ("feed = spamco https://a.example/x.csv compression=bz2", "compression= expected auto, none, gzip or zip"),
            ("feed = spamco https://a.example/x.csv sha256=abc", "64 hexadecimal digits"),
            ("feed = spamco https://a.example/x.csv max-size=10", "max-size="),
            ("feed = spamco https://a.example/x.csv max-size=lots", "max-size="),
            ("feed = spamco https://a.example/x.csv timeout=0", "timeout="),
            ("feed = spamco https://a.example/x.csv max-shrink=101", "max-shrink="),
            ("feed = spamco https://a.example/x.csv timeout=5 timeout=6", "given twice"),
            ("feed = spamco https://a.example/x.csv compression=gzip members=a.csv", "only applies to zip"),
            ("feed = spamco https://a.example/x.csv manifest=file:///etc/passwd", "manifest="),
            ("feed = spamco https://a.example/x.csv into=", "needs a value"),
            ("feed = a https://a.example/x.csv\nfeed = a https://b.example/y.csv", "feed 'a' is already defined"),
        ]
        for (text, expected) in cases {
            XCTAssertThrowsError(try parse(text), text) { error in
                let message = "\(error)"
                XCTAssertTrue(message.contains(expected), "\(text): \(message)")
                XCTAssertTrue(message.hasPrefix("/etc/lookupd/lookupd.conf:"), message)
            }
        }
        XCTAssertThrowsError(try parse("feeds = x")) { XCTAssertTrue("\($0)".contains("did you mean 'feed'?"), "\($0)") }
    }

    func testByteSizes() {
        XCTAssertEqual(FeedConfig.parseByteSize("1024"), 1024)
        XCTAssertEqual(FeedConfig.parseByteSize("4k"), 4096)
        XCTAssertEqual(FeedConfig.parseByteSize("2G"), 2 << 30)
        XCTAssertNil(FeedConfig.parseByteSize("9999999999T"))
        XCTAssertNil(FeedConfig.parseByteSize("-1"))
    }

    func testStateFileRoundTripsAndSkipsUnknownKeys() throws {
        var record = FeedRecord(feed: "spamco")
        record.url = "https://feeds.example/spam.csv"
        record.version = "2024.05"
        record.entries = 42
        record.updated = 1_714_550_000
        record.etag = "\"abc\""
        record.error = "line one\nline two"
        let text = record.encoded()
        var decoded = try XCTUnwrap(FeedRecord.decode(text + "future-key = something\n"))
        XCTAssertEqual(decoded.error, "line one line two", "one line per value")
        decoded.error = record.error
        XCTAssertEqual(decoded, record)
        XCTAssertNil(FeedRecord.decode("# nothing\n"))

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("lkd-state-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = FeedRecordStore(folder: folder)
        try store.write(record)
        XCTAssertEqual(store.read("spamco")?.entries, 42)
        XCTAssertNil(store.read("other"))

        record.shiftToPrevious()
        record.entries = 50
        record.swapWithPrevious()
        XCTAssertEqual(record.entries, 42)
        XCTAssertEqual(record.previousEntries, 50)
    }

    /// L1: "\r\n" is one Swift Character, equal to neither "\r" nor "\n": a CRLF (or a lone
    /// CR, a NEL, U+2028) in a value must not reach the state file as a line break, where it
    /// would split a key.
    func testLineBreaksOfEveryKindStayOutOfTheStateFile() {
        var record = FeedRecord(feed: "spamco")
        record.error = "HTTP 500\r\nreload-pending = 1\rnext\u{85}line\u{2028}sep"
        record.reloadPending = 0
        let text = record.encoded()
        XCTAssertEqual(text.split(separator: "\n", omittingEmptySubsequences: false).count,
                       FeedRecord(feed: "x").encoded().split(separator: "\n", omittingEmptySubsequences: false).count, text)
        XCTAssertFalse(text.unicodeScalars.contains { $0 == "\r" || $0.value == 0x85 || $0.value == 0x2028 }, text)
        let decoded = FeedRecord.decode(text)
        XCTAssertEqual(decoded?.reloadPending, 0, "the forged key stayed inside the error value")
        XCTAssertEqual(decoded?.error, "HTTP 500  reload-pending = 1 next line sep")
        record.reloadPending = 1_714_550_000
        XCTAssertEqual(FeedRecord.decode(record.encoded())?.reloadPending, 1_714_550_000)
    }

    func testSHA256KnownAnswers() {
        // FIPS 180-2 examples.
        XCTAssertEqual(SHA256Hasher.hash(Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(SHA256Hasher.hash([]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(SHA256Hasher.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        let hasher = SHA256Hasher()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        for _ in 0..<1000 { chunk.withUnsafeBytes { hasher.update($0) } }
        XCTAssertEqual(hasher.finish(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    func testManifestParsing() throws {
        let m = try FeedManifest.parse(Array(#"{"version": 7, "size": 10, "count": 3, "sha256": "\#(String(repeating: "A", count: 64))", "extra": [1]}"#.utf8))
        XCTAssertEqual(m, FeedManifest(version: "7", size: 10, count: 3, sha256: String(repeating: "a", count: 64)))
        XCTAssertEqual(try FeedManifest.parse(Array(#"{"entries": 5}"#.utf8)).count, 5)
        for bad in [#"[1]"#, #"{"size": -1}"#, #"{"count": "many"}"#, #"{"sha256": "xyz"}"#, #"{"version": ""}"#, "{}"] {
            XCTAssertThrowsError(try FeedManifest.parse(Array(bad.utf8)), bad)
        }
    }

    func testUnsafeMemberPaths() {
        for name in ["../x.csv", "a/../../x.csv", "/etc/passwd", "\\x.csv", "a\\..\\x.csv", "C:x.csv", "a\u{1}b.csv"] {
            XCTAssertNotNil(ZipExtractor.unsafePathProblem(name), name)
        }
        for name in ["x.csv", "lists/2024/x.csv", "..x.csv", "x..csv", "dir/"] {
            XCTAssertNil(ZipExtractor.unsafePathProblem(name), name)
        }
    }

    func testRemoteFileNamesAndStamps() {
        XCTAssertEqual(FeedUnpacker.remoteFileName("https://a.example/lists/spam.csv.gz?token=1#x"), "spam.csv.gz")
        XCTAssertEqual(FeedUnpacker.remoteFileName("https://a.example"), "index")
        XCTAssertEqual(FeedUnpacker.remoteFileName("https://a.example/"), "index")
        XCTAssertEqual(FeedClock.stamp(0), "19700101000000")
        XCTAssertEqual(FeedClock.stamp(1_714_564_800), "20240501120000")
        XCTAssertEqual(FeedClock.iso(1_714_564_800), "2024-05-01T12:00:00Z")
        XCTAssertEqual(FeedClock.iso(0), "never")
    }
}
