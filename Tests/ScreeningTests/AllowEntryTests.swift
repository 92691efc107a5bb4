import Foundation
import XCTest
@testable import Directory
import Identity
import Configuration
import Loading
@testable import Screening
import TextFormats

/// Issue 17 item 3: an allow entry in a higher-priority directory overrides the blocks of
/// the lower ones, keeps its own label, and names what it overrode.
final class AllowEntryTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder() }
    override func tearDown() { folder.cleanup() }

    func summary(_ set: ScreeningSet, _ identity: String) -> String {
        let d = set.decide(identity: identity)
        return [d.verdict.rawValue, d.label.map { set.label($0) } ?? "-", d.source.map { set.sourceName($0) } ?? "-",
                d.match?.description ?? "-", d.allowed ? "allowed" : "-"].joined(separator: " | ")
    }

    /// customer (first) allows one number and a range; carrier (second) blocks a wider range.
    func customerOverCarrier() throws -> ScreeningSet {
        let customer = try compileDirectory("""
        number,action,label
        +8613800000001,allow,Our Supplier
        +8613800000002,allow,
        +86139*,allow,
        +8613700000001,block,Customer Block
        """, named: "customer.lkd", in: folder)
        let carrier = try compileDirectory("""
        number,action,label
        +861380*,block,Carrier Feed
        +86139*,block,Range Spam
        +8613700000001,allow,
        +8613600000001,identify,Carrier Label
        """, named: "carrier.lkd", in: folder)
        XCTAssertEqual(customer.header.formatVersion, DirectoryFormat.nodesVersion, "version 4 holds allow entries")
        return ScreeningSet(normalizer: NumberNormalizer(), contacts: [],
                            directories: [ScreeningDirectory(name: "customer", file: customer), ScreeningDirectory(name: "carrier", file: carrier)])
    }

    func testAllowInTheFirstDirectoryBeatsABlockInTheSecond() throws {
        let set = try customerOverCarrier()
        XCTAssertEqual(summary(set, "+8613800000001"), "identified | Our Supplier | customer | +8613800000001 | allowed")
        // No label of its own: passes unlabelled, never with the overridden block's label.
        XCTAssertEqual(summary(set, "+8613800000002"), "unknown | - | customer | +8613800000002 | allowed")
        // An allow prefix overrides a block prefix.
        XCTAssertEqual(summary(set, "+8613912345678"), "unknown | - | customer | +86139* | allowed")
        // A lower directory's label that blocks nothing still shows.
        XCTAssertEqual(summary(set, "+8613600000001"), "identified | Carrier Label | carrier | +8613600000001 | -")
        // The rest of the carrier's range is still blocked.
        XCTAssertEqual(summary(set, "+8613800000003"), "blocked | Carrier Feed | carrier | +861380* | -")
        // A block in the higher directory is not undone by an allow in a lower one.
        XCTAssertEqual(summary(set, "+8613700000001"), "blocked | Customer Block | customer | +8613700000001 | -")
        // An allowed number no lower directory blocks: nothing overridden.
        XCTAssertEqual(set.overriddenBlocks(set.decide(identity: "+8613800000001")).map { set.directories[$0.directory].name + " " + $0.match.description },
                       ["carrier +861380*"])
        XCTAssertTrue(set.overriddenBlocks(set.decide(identity: "+8613800000003")).isEmpty, "a block overrides nothing")
    }

    func testWithoutTheAllowTheNumberIsBlocked() throws {
        let set = try customerOverCarrier()
        let carrierOnly = ScreeningSet(normalizer: set.normalizer, contacts: [], directories: [set.directories[1]])
        XCTAssertEqual(summary(carrierOnly, "+8613800000001"), "blocked | Carrier Feed | carrier | +861380* | -")
        // Reversed priority: the carrier's block comes first and stands.
        let reversed = ScreeningSet(normalizer: set.normalizer, contacts: [], directories: set.directories.reversed())
        XCTAssertEqual(summary(reversed, "+8613800000001"), "blocked | Carrier Feed | carrier | +861380* | -")
    }

    func testQueryJSONNamesTheDecidingEntryAndTheOverriddenBlocks() throws {
        let set = try customerOverCarrier()
        var w = JSONWriter()
        let input = "+8613800000001"
        Array(input.utf8).withUnsafeBytes { set.writeJSON(set.decide(identity: input), input: $0, to: &w) }
        let json = String(decoding: w.bytes, as: UTF8.self)
        XCTAssertTrue(json.contains(#""source":"customer","match":"+8613800000001""#), json)
        XCTAssertTrue(json.contains(#""allowed":true,"overridden":[{"source":"carrier","match":"+861380*"}]"#), json)
        w.reset()
        Array("+8613800000003".utf8).withUnsafeBytes { set.writeJSON(set.decide(identity: "+8613800000003"), input: $0, to: &w) }
        XCTAssertTrue(String(decoding: w.bytes, as: UTF8.self).contains(#""allowed":false,"overridden":[]"#))
    }

    func testContactsStillComeFirst() throws {
        let set = try customerOverCarrier()
        let contacts = try parseContacts("name,number\nMum,+8613800000001\n", name: "friends.csv", format: .csv).list
        let withContacts = ScreeningSet(normalizer: set.normalizer, contacts: [contacts], directories: set.directories)
        XCTAssertEqual(summary(withContacts, "+8613800000001"), "contact | Mum | friends.csv | +8613800000001 | -")
    }

    func testJournalAllowOverridesAndCompactionKeepsIt() throws {
        let customer = folder.file("customer.lkd")
        try compileDirectory("number,action,label\n+8613600000009,identify,Someone\n", named: "customer.lkd", in: folder)
        let carrier = try compileDirectory("number,action,label\n+861380*,block,Carrier Feed\n", named: "carrier.lkd", in: folder)
        let change = try DirectoryUpdates.add(pattern("+8613800000007"), blocked: false, label: Array("Plumber".utf8), directory: customer,
                                              allowed: true)
        XCTAssertNotNil(change.record)
        XCTAssertThrowsError(try DirectoryUpdates.add(pattern("+8613800000008"), blocked: true, label: nil, directory: customer, allowed: true),
                             "block and allow at once is refused")
        func set() throws -> ScreeningSet {
            var config = LookupdConfig()
            config.directories = [DirectoryConfig(path: customer, name: "customer"), DirectoryConfig(path: folder.file("carrier.lkd"), name: "carrier")]
            return try ScreeningLoader.load(config, verify: true).set
        }
        XCTAssertEqual(summary(try set(), "+8613800000007"), "identified | Plumber | customer | +8613800000007 | allowed")
        XCTAssertEqual(summary(try set(), "+8613800000006"), "blocked | Carrier Feed | carrier | +861380* | -")
        let stored = try DirectoryUpdates.stored(pattern("+8613800000007"), base: DirectoryFile(path: customer),
                                                 state: JournalFollower.read(path: JournalFormat.path(forDirectory: customer))!.state)
        XCTAssertEqual(stored?.allowed, true)
        _ = try DirectoryUpdates.compact(directory: customer)
        XCTAssertEqual(try DirectoryFile(path: customer).header.formatVersion, DirectoryFormat.nodesVersion)
        XCTAssertEqual(summary(try set(), "+8613800000007"), "identified | Plumber | customer | +8613800000007 | allowed")
        _ = carrier
    }

    func testAFileWithoutAllowEntriesStaysVersion2AndAnAllowNeedsNoLabel() throws {
        // Written in binary order (for a fleet whose lookupd reads only 1 to 3), a file is
        // version 2 without allow entries and 3 with them.
        var c = DirectoryContent()
        c.exactKeys = [8613800000001]
        c.exactValues = [DirectoryFormat.encodeValue(blocked: true, label: nil)]
        try DirectoryWriter.write(c, to: folder.file("plain.lkd"), formatVersion: 2)
        XCTAssertEqual(try DirectoryFile(path: folder.file("plain.lkd")).header.formatVersion, 2, "older lookupd still read files without allow entries")
        c.exactValues = [DirectoryFormat.encodeValue(blocked: false, label: nil, allowed: true)]
        try DirectoryWriter.write(c, to: folder.file("allow2.lkd"), formatVersion: 2)
        let allow2 = try DirectoryFile(path: folder.file("allow2.lkd"))
        XCTAssertEqual(allow2.header.formatVersion, DirectoryFormat.allowVersion)
        XCTAssertEqual(try allow2.lookup(number("+8613800000001"))?.allowed, true)
        XCTAssertNoThrow(try allow2.verify())
        let bare = try compileDirectory("number,action\n+8613800000001,allow\n", named: "bare.lkd", in: folder)
        XCTAssertEqual(try bare.lookup(number("+8613800000001"))?.allowed, true)
        XCTAssertNoThrow(try bare.verify())
    }
}

/// Issue 17 item 5: a callee's own block list, between the contacts and the directories.
final class CalleeBlocksScreeningTests: XCTestCase {
    func content(_ csv: String) throws -> DirectoryContent {
        let compiler = DirectoryCompiler(options: DirectoryCompiler.Options())
        compiler.add(bytes: Array(csv.utf8), name: "list.csv", format: .csv)
        return try compiler.finish().get()
    }

    func testOnlyThatCalleeAndBeforeTheDirectories() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanup() }
        let global = try compileDirectory("number,action,label\n+86138*,block,Carrier Range\n", named: "global.lkd", in: folder)
        let normalizer = NumberNormalizer()
        let blocks = CalleeBlocks(folder: "blocks", lists: [
            (stem: "1001", list: CalleeBlockList(name: "blocks/1001.csv", content: try content("number,action,label\n+8613000000001,block,Ex\n+8613800000001,allow,\n+86139*,block,\n"))),
        ], normalizer: normalizer)
        let contacts = try parseContacts("name,number\nMum,+8613000000001\n", name: "friends.csv", format: .csv).list
        let set = ScreeningSet(normalizer: normalizer, contacts: [], directories: [ScreeningDirectory(name: "global", file: global)],
                               calleeBlocks: blocks)
        func decide(_ caller: String, _ callee: String, in set: ScreeningSet) -> Decision {
            callee.utf8CString.withUnsafeBytes { raw in
                set.decide(caller: caller, context: CallContext(callee: UnsafeRawBufferPointer(rebasing: raw.dropLast())))
            }
        }
        let d = decide("+8613000000001", "1001", in: set)
        XCTAssertEqual(d.verdict, .blocked)
        XCTAssertEqual(d.source.map(set.sourceName), "blocks/1001.csv")
        XCTAssertEqual(d.label.map(set.label), "Ex")
        XCTAssertEqual(decide("+8613000000001", "1002", in: set).verdict, .unknown)
        XCTAssertEqual(decide("+8613912345678", "1001", in: set).verdict, .blocked, "a prefix rule")
        let allowed = decide("+8613800000001", "1001", in: set)
        XCTAssertEqual(allowed.verdict, .unknown)
        XCTAssertTrue(allowed.allowed)
        XCTAssertEqual(set.overriddenBlocks(allowed).map(\.directory), [0], "the global block it overrode")
        XCTAssertEqual(decide("+8613800000001", "1002", in: set).verdict, .blocked)
        let withContacts = ScreeningSet(normalizer: normalizer, contacts: [contacts], directories: set.directories, calleeBlocks: blocks)
        XCTAssertEqual(decide("+8613000000001", "1001", in: withContacts).verdict, .contact, "contacts come first")
        XCTAssertEqual(blocks.bytes, 3 * 12 + 2)
    }
}
