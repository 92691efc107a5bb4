import Foundation
import XCTest
@testable import Configuration
@testable import Directory
@testable import Replication

/// The value and key formats in etcd (docs/CLUSTER.md, "Keys and values"),
/// base64 as etcd's gateway writes it, and the `replicate` key.
final class ValueTests: XCTestCase {
    func testBase64AgreesWithFoundationAndRefusesNonCanonicalText() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let encoded = Base64.encode(bytes)
            XCTAssertEqual(encoded, Data(bytes).base64EncodedString())
            XCTAssertEqual(Base64.decode(encoded), bytes)
        }
        for bad in ["Zm9", "Zm9v!", "Zm==x===", "Zh==", "Zm9w=", "===="] { XCTAssertNil(Base64.decode(bad), bad) }
        XCTAssertEqual(Base64.decode("Zm9v"), Array("foo".utf8))
    }

    func testValueRoundTripAndWhatIsWritten() throws {
        let value = ReplicatedValue(blocked: true, label: Array("Zoë's \"Café\"".utf8), origin: "node-a", time: 1_748_772_000_123)
        XCTAssertEqual(value.json, #"{"v":1,"action":"block","label":"Zoë's \"Café\"","origin":"node-a","time":"2025-06-01T10:00:00.123Z"}"#)
        XCTAssertEqual(try ReplicatedValue.parse(Array(value.json.utf8)).get(), value)
        let remove = ReplicatedValue(action: .remove, label: nil, origin: "b", time: 0)
        XCTAssertEqual(try ReplicatedValue.parse(Array(remove.json.utf8)).get(), remove)
        XCTAssertEqual(remove.entry(revision: 9).action, .remove)
        XCTAssertEqual(ReplicatedValue(blocked: false, label: Array("Bank".utf8), origin: "c", time: 0).entry(revision: 3).action,
                       .add(blocked: false, label: Array("Bank".utf8)))
    }

    /// Unknown members are ignored; unknown critical members, actions and
    /// versions are refused, as are values that would mean something else
    /// half-read. Informational members never refuse a value.
    func testWhatAReaderAppliesAndRefuses() {
        func parse(_ text: String) -> Result<ReplicatedValue, ReplicatedValue.ValueProblem> { ReplicatedValue.parse(Array(text.utf8)) }
        func refused(_ text: String, _ why: String, file: StaticString = #filePath, line: UInt = #line) {
            guard case .failure(let problem) = parse(text) else { return XCTFail("applied: \(text)", file: file, line: line) }
            XCTAssertTrue(problem.description.contains(why), "\(text): \(problem)", file: file, line: line)
        }
        guard case .success(let v) = parse(#"{"action":"block","note":"from the fraud desk","score":0.97}"#) else { return XCTFail("unknown members") }
        XCTAssertEqual(v.action, .block)
        XCTAssertNil(v.label)
        guard case .success(let w) = parse(#"{"action":"identify","label":"Bank","origin":"bad\u0001origin","time":"yesterday"}"#) else {
            return XCTFail("informational members")
        }
        XCTAssertEqual(w.origin, "")
        XCTAssertEqual(w.time, 0)
        guard case .success = parse(#"{"v":1,"crit":["action","label"],"action":"block"}"#) else { return XCTFail("crit of known members") }

        refused(#"{"action":"block","expires":"2025-06-02T10:00:00Z","crit":["expires"]}"#, "critical member 'expires'")
        refused(#"{"action":"unblock"}"#, "action 'unblock' is not known")
        refused(#"{"v":2,"action":"block"}"#, "format version 2")
        refused(#"{"action":"identify"}"#, "identify without a label")
        refused(#"{"action":"remove","label":"x"}"#, "remove with a label")
        refused(#"{"action":"block","label":"two\nlines"}"#, "bad label")
        refused(#"{"action":"block","label":""}"#, "bad label")
        refused(#"{"label":"x"}"#, "no 'action'")
        refused(#"["action","block"]"#, "not a JSON object")
        refused("block", "not JSON")
        refused(#"{"action":"block","crit":"expires"}"#, "'crit' is not a list")
        refused("{\"action\":\"block\",\"pad\":\"" + String(repeating: "x", count: 5000) + "\"}", "more than")

        let (entry, problem) = ReplicatedValue.entry(Array(#"{"action":"unblock"}"#.utf8), revision: 12)
        XCTAssertNotNil(problem)
        XCTAssertEqual(entry, ReplicaEntry(revision: 12, action: .refused(value: Array(#"{"action":"unblock"}"#.utf8))))
        // Issue 17's allow, as planned: applied by this lookupd, refused by older ones.
        let (allowed, none) = ReplicatedValue.entry(Array(#"{"action":"allow","label":"Our Bank"}"#.utf8), revision: 13)
        XCTAssertNil(none)
        XCTAssertEqual(allowed, ReplicaEntry(revision: 13, action: .add(blocked: false, label: Array("Our Bank".utf8), allowed: true)))
    }

    func testTimesAreRFC3339InUTC() {
        XCTAssertEqual(ReplicatedValue.formatTime(0), "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(ReplicatedValue.formatTime(1_748_772_000_007), "2025-06-01T10:00:00.007Z")
        XCTAssertEqual(ReplicatedValue.parseTime("2025-06-01T10:00:00.007Z"), 1_748_772_000_007)
        XCTAssertEqual(ReplicatedValue.parseTime("2025-06-01T10:00:00Z"), 1_748_772_000_000)
        XCTAssertEqual(ReplicatedValue.parseTime("2025-06-01T10:00:00.5Z"), 1_748_772_000_500)
        for bad in ["2025-06-01 10:00:00Z", "2025-13-01T10:00:00Z", "2025-06-01T10:00:00+02:00", "2025-06-01T10:00:00.Z"] {
            XCTAssertNil(ReplicatedValue.parseTime(bad), bad)
        }
    }

    func testKeysAreCanonicalNumbersAndPrefixRules() {
        let prefix = Array("/lookupd/main/".utf8)
        func pattern(_ key: String) -> String? { ReplicatedKeys.pattern(Array(key.utf8), directoryPrefix: prefix)?.description }
        XCTAssertEqual(pattern("/lookupd/main/+8613800138000"), "+8613800138000")
        XCTAssertEqual(pattern("/lookupd/main/+86170*"), "+86170*")
        for bad in ["/lookupd/main/8613800138000", "/lookupd/main/+086", "/lookupd/main/+86 138", "/lookupd/main/+1234567890123456",
                    "/lookupd/main/+", "/lookupd/main/+*", "/lookupd/mainx/+86", "/lookupd/main/+86/1", "/lookupd/other/+86"] {
            XCTAssertNil(pattern(bad), bad)
        }
        guard case .success(let number) = NumberNormalizer().pattern("+86 138 0013 8000") else { return XCTFail() }
        XCTAssertEqual(ReplicatedKeys.key("/lookupd/main/", number), "/lookupd/main/+8613800138000")
        XCTAssertEqual(ReplicatedKeys.rangeEnd(prefix), Array("/lookupd/main0".utf8))
        XCTAssertEqual(ReplicatedKeys.rangeEnd([0x61, 0xFF]), [0x62])
    }

    func testReplicateKey() throws {
        func parse(_ line: String) throws -> ReplicationConfig? {
            try ConfigParser.parse("directory = main.lkd name=main\n" + line + "\n", path: "/etc/lookupd/lookupd.conf").replication
        }
        let config = try XCTUnwrap(parse("replicate = etcd http://10.0.0.1:2379/,https://etcd-2.example:2379 prefix=/carrier token-file=etcd.token node=node-a start-wait=2.5"))
        XCTAssertEqual(config.endpoints, ["http://10.0.0.1:2379", "https://etcd-2.example:2379"])
        XCTAssertEqual(config.prefix, "/carrier/")
        XCTAssertEqual(config.tokenFile, "/etc/lookupd/etcd.token")
        XCTAssertEqual(config.node, "node-a")
        XCTAssertEqual(config.startWait, 2.5)
        XCTAssertEqual(config.keyPrefix(directory: "main"), "/carrier/main/")
        let defaults = try XCTUnwrap(parse("replicate = etcd http://127.0.0.1:2379"))
        XCTAssertEqual(defaults.prefix, "/lookupd/")
        XCTAssertEqual(defaults.startWait, 5)
        XCTAssertFalse(defaults.node.isEmpty)
        XCTAssertNil(try parse(""))

        func refused(_ text: String, _ why: String, file: StaticString = #filePath, line: UInt = #line) {
            XCTAssertThrowsError(try ConfigParser.parse(text, path: "lookupd.conf"), file: file, line: line) { error in
                XCTAssertTrue("\(error)".contains(why), "\(error)", file: file, line: line)
            }
        }
        refused("replicate = consul http://a:1\n", "etcd is the only replication backend")
        refused("replicate = etcd\n", "expected 'etcd URL")
        refused("replicate = etcd 10.0.0.1:2379\n", "is not an etcd client URL")
        refused("replicate = etcd http://a:1/v3\n", "is not an etcd client URL")
        refused("replicate = etcd http://a:1,http://a:1\n", "listed twice")
        refused("replicate = etcd http://a:1 prefix=lookupd\n", "prefix= must start with '/'")
        refused("replicate = etcd http://a:1 node=a/b\n", "node= must be")
        refused("replicate = etcd http://a:1 start-wait=-1\n", "start-wait=")
        refused("replicate = etcd http://a:1 retries=3\n", "unknown replicate option 'retries'")
        refused("directory = a.lkd name=x\ndirectory = b.lkd name=x\nreplicate = etcd http://a:1\n", "lookupd.conf:3: replicate: two directories are named 'x'")
        refused("directory = a.lkd name=fraud/desk\nreplicate = etcd http://a:1\n", "cannot be part of an etcd key")
    }
}
