import Foundation
import XCTest
@testable import Directory

/// The file format: Eytzinger layout at awkward sizes, iteration order,
/// prefix precedence, header fields and the writer's guarantees.
final class FormatTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder("lookupd-format") }
    override func tearDown() { folder.cleanup() }

    /// `n` numbers spaced 7 apart, alternating block / identify / both.
    func sampleContent(_ n: Int) -> DirectoryContent {
        var c = DirectoryContent()
        c.labels = ["Alpha", "Beta", "Gamma"].map { Array($0.utf8) }
        for i in 0..<n {
            c.exactKeys.append(8613800000000 + UInt64(i) * 7)
            switch i % 3 {
            case 0: c.exactValues.append(DirectoryFormat.encodeValue(blocked: true, label: nil))
            case 1: c.exactValues.append(DirectoryFormat.encodeValue(blocked: false, label: UInt32((i / 3) % 3)))
            default: c.exactValues.append(DirectoryFormat.encodeValue(blocked: true, label: UInt32((i / 3) % 3)))
            }
        }
        return c
    }

    /// `sampleContent(n)` written in either order: the count, a clean verify, every number
    /// found with its own data, the numbers between, before and after not, and the
    /// iteration ascending and complete.
    private func assertAnswersEverything(_ c: DirectoryContent, _ directory: DirectoryFile, _ n: Int,
                                         file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(directory.count, n, file: file, line: line)
        XCTAssertNoThrow(try directory.verify(), "n=\(n)", file: file, line: line)
        for (key, value) in zip(c.exactKeys, c.exactValues) {
            let entry = try directory.lookup(PhoneNumber(value: key)!)
            XCTAssertEqual(entry?.match, .exact(PhoneNumber(value: key)!), "n=\(n) key=\(key)", file: file, line: line)
            XCTAssertEqual(entry?.blocked, value & 1 == 1, "n=\(n) key=\(key)", file: file, line: line)
            XCTAssertEqual(entry?.label, value >> 1 == 0 ? nil : (value >> 1) - 1, "n=\(n) key=\(key)", file: file, line: line)
        }
        var absent: [UInt64] = [1, 8613799999999, 8613800000000 + UInt64(n) * 7, 999_999_999_999_999]
        for i in 0..<n { absent += [8613800000000 + UInt64(i) * 7 + 1, 8613800000000 + UInt64(i) * 7 + 6] }
        for key in absent {
            XCTAssertNil(try directory.lookup(PhoneNumber(value: key)!), "n=\(n) absent key=\(key)", file: file, line: line)
        }
        XCTAssertEqual(entries(of: directory).map(\.match), c.exactKeys.map { .exact(PhoneNumber(value: $0)!) }, "n=\(n)", file: file, line: line)
    }

    /// Version 2 (binary order), still written for fleets whose lookupd reads only 1 to 3.
    func testEytzingerLayoutAtAwkwardSizes() throws {
        for n in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 1000] {
            let c = sampleContent(n)
            let directory = try writeAndOpen(c, in: folder, name: "n\(n).lkd", formatVersion: 2)
            XCTAssertEqual(directory.header.formatVersion, 2)
            try assertAnswersEverything(c, directory, n)

            // The keys section really is breadth-first: slot 0 unused, and an
            // in-order walk of slots 1...n visits the keys ascending.
            let bytes = readBytes(folder.file("n\(n).lkd"))
            let keysOffset = Int(directory.header.keysOffset)
            func slot(_ k: Int) -> UInt64 {
                bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: keysOffset + 8 * k, as: UInt64.self)) }
            }
            XCTAssertEqual(slot(0), 0)
            var inOrder: [UInt64] = []
            func walk(_ k: Int) { guard k <= n else { return }; walk(2 * k); inOrder.append(slot(k)); walk(2 * k + 1) }
            walk(1)
            XCTAssertEqual(inOrder, c.exactKeys, "n=\(n)")
            if n >= 3 { XCTAssertEqual(slot(1), c.exactKeys[Self.eytzingerRootIndex(n)], "n=\(n): root is the in-order rank of slot 1") }
        }
    }

    /// Version 4: the sizes around a node (8), a full level (8 + 72 = 80 slots, 10 nodes)
    /// and a partial last level. Every number found with its data and every gap not, the
    /// iteration ascending, and the bytes laid out as docs/FORMAT.md says: an in-order walk
    /// of the 9-ary tree (node k's children 9k+1...9k+9) visits the numbers ascending, then
    /// the padding.
    func testNodeLayoutAtAwkwardSizes() throws {
        for n in [0, 1, 2, 7, 8, 9, 15, 16, 17, 72, 79, 80, 81, 88, 100, 648, 729, 730, 1000, 6000] {
            let c = sampleContent(n)
            let directory = try writeAndOpen(c, in: folder, name: "n\(n).lkd")
            XCTAssertEqual(directory.header.formatVersion, DirectoryFormat.nodesVersion)
            try assertAnswersEverything(c, directory, n)

            let bytes = readBytes(folder.file("n\(n).lkd"))
            let keysOffset = Int(directory.header.keysOffset), valuesOffset = Int(directory.header.valuesOffset)
            let nodes = (n + 7) / 8
            XCTAssertEqual(valuesOffset - keysOffset, 64 * nodes, "n=\(n)")
            func slot(_ k: Int) -> (UInt64, UInt32) {
                bytes.withUnsafeBytes { (UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: keysOffset + 8 * k, as: UInt64.self)),
                                         UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: valuesOffset + 4 * k, as: UInt32.self))) }
            }
            var inOrder: [(UInt64, UInt32)] = []
            func walk(_ node: Int) {
                guard node < nodes else { return }
                for i in 0..<8 {
                    walk(9 * node + i + 1)
                    inOrder.append(slot(8 * node + i))
                }
                walk(9 * node + 9)
            }
            walk(0)
            XCTAssertEqual(inOrder.map(\.0), c.exactKeys + Array(repeating: UInt64.max, count: 8 * nodes - n), "n=\(n)")
            XCTAssertEqual(inOrder.map(\.1), c.exactValues + Array(repeating: 0, count: 8 * nodes - n), "n=\(n)")
        }
    }

    /// The batched search and the single one agree on files of every awkward size, the
    /// lanes ending a level apart on a partial last level.
    func testBatchedNodeSearchAtAwkwardSizes() throws {
        for n in [1, 9, 80, 81, 730, 6000] {
            let c = sampleContent(n)
            let directory = try writeAndOpen(c, in: folder, name: "b\(n).lkd")
            var ascending: [PhoneNumber] = []
            for i in 0...n { ascending += [PhoneNumber(value: 8613800000000 + UInt64(i) * 7)!, PhoneNumber(value: 8613800000000 + UInt64(i) * 7 + 3)!] }
            // Descending too: the lanes that go deepest (the leftmost, smallest numbers on a
            // partial last level) then come after lanes that are done.
            let probes = ascending + ascending.reversed()
            var results = [Result<DirectoryEntry?, DirectoryError>](repeating: .success(nil), count: probes.count)
            for pass in 0..<2 {
                probes.withUnsafeBufferPointer { p in results.withUnsafeMutableBufferPointer { directory.lookupBatch(p, into: $0) } }
                for (p, r) in zip(probes, results) {
                    XCTAssertEqual(try r.get(), try directory.lookup(p), "n=\(n) \(p) pass \(pass)")
                }
                // Second pass: every block verified, the trusted path.
                try directory.verify()
            }
        }
    }

    /// Index in sorted order of the element that lands in slot 1 (the root).
    static func eytzingerRootIndex(_ n: Int) -> Int {
        var count = 0
        func size(_ k: Int) -> Int { k > n ? 0 : 1 + size(2 * k) + size(2 * k + 1) }
        count = size(2)
        return count
    }

    func testPrefixPrecedence() throws {
        let c = try content([Source("dir.csv", .csv, """
        number,action,label
        +86*,block,
        +86170*,identify,Virtual Operator
        +861705555*,block,Known Spammer Range
        +8617055551234,identify,Exact Entry
        +1*,identify,North America
        +12125550100,block,
        """)])
        let directory = try writeAndOpen(c, in: folder)
        func describe(_ text: String) -> String {
            guard let entry = try! directory.lookup(number(text)) else { return "none" }
            return "\(entry.match) \(entry.blocked ? "block" : "identify") \(entry.label.map { directory.label($0) } ?? "-")"
        }
        XCTAssertEqual(describe("+8617055551234"), "+8617055551234 identify Exact Entry")
        XCTAssertEqual(describe("+8617055559999"), "+861705555* block Known Spammer Range")
        XCTAssertEqual(describe("+8617012345678"), "+86170* identify Virtual Operator")
        XCTAssertEqual(describe("+86170"), "+86170* identify Virtual Operator")
        XCTAssertEqual(describe("+8613800138000"), "+86* block -")
        XCTAssertEqual(describe("+12125550100"), "+12125550100 block -")
        XCTAssertEqual(describe("+12125550101"), "+1* identify North America")
        XCTAssertEqual(describe("+442079460000"), "none")
        XCTAssertEqual(describe("+8"), "none")
        XCTAssertEqual(directory.header.prefixLengthMask, 1 << 1 | 1 << 2 | 1 << 5 | 1 << 9)
        XCTAssertEqual(directory.prefixRuleCount, 4)
        // Prefix rules iterate after the exact entries, by (length, digits).
        XCTAssertEqual(entries(of: directory).map(\.match.description),
                       ["+12125550100", "+8617055551234", "+1*", "+86*", "+86170*", "+861705555*"])
    }

    func testFifteenDigitPrefixAndLongestNumbers() throws {
        let c = try content([Source("dir.txt", .text, "+123456789012345*\n+491234567890123\n+4702800\n")])
        let directory = try writeAndOpen(c, in: folder)
        XCTAssertEqual(try directory.lookup(number("+123456789012345"))?.match, .prefix(prefix("+123456789012345*")))
        XCTAssertEqual(try directory.lookup(number("+491234567890123"))?.match, .exact(number("+491234567890123")))
        XCTAssertEqual(try directory.lookup(number("+4702800"))?.match, .exact(number("+4702800")))
        XCTAssertNil(try directory.lookup(number("+12345678901234")))
        XCTAssertNoThrow(try directory.verify())
    }

    func testHeaderFieldsAndLayout() throws {
        let c = try content([Source("dir.csv", .csv, """
        number,action,label
        +8613800138000,block,Fraud
        +8613800138001,identify,Bank
        +8613800138002,block,
        +86170*,block,Range
        """)], options: { var o = DirectoryCompiler.Options(); o.directoryVersion = 7; return o }())
        let path = folder.file("h.lkd")
        try DirectoryWriter.write(c, to: path)
        let directory = try DirectoryFile(path: path)
        let h = directory.header
        XCTAssertEqual(h.formatVersion, 4)
        XCTAssertEqual(h.flags, 2, "version 4: the numbers in nodes of eight")
        XCTAssertEqual(h.directoryVersion, 7)
        XCTAssertEqual(h.entryCount, 3)
        XCTAssertEqual(h.prefixCount, 1)
        XCTAssertEqual(h.labelCount, 3)
        XCTAssertEqual(h.blockedCount, 3)
        XCTAssertEqual(h.identifiedCount, 3)
        XCTAssertEqual(h.keysOffset, 256)
        // Three numbers fill one node of eight slots: 8 keys, then 8 values.
        XCTAssertEqual(h.valuesOffset, 256 + 8 * 8)
        XCTAssertEqual(h.prefixesOffset, UInt64(DirectoryLayout.align8(256 + 64 + 8 * 4)))
        XCTAssertEqual(h.labelIndexOffset, h.prefixesOffset + 16)
        XCTAssertEqual(h.labelDataOffset, h.labelIndexOffset + 4 * 4)
        XCTAssertEqual(h.labelDataSize, UInt64("BankFraudRange".utf8.count))
        XCTAssertEqual(h.contentEnd, UInt64(DirectoryLayout.align8(Int(h.labelDataOffset + h.labelDataSize))))
        // One 4 KiB block holds the whole content: one checksum, one root entry.
        XCTAssertEqual(h.blockShift, 12)
        XCTAssertEqual(h.blockCount, 1)
        XCTAssertEqual(h.checksumTableOffset, h.contentEnd)
        XCTAssertEqual(h.rootTableOffset, h.contentEnd + 8)
        XCTAssertEqual(h.rootTableCount, 1)
        XCTAssertEqual(h.fileSize, h.rootTableOffset + 8)

        let bytes = readBytes(path)
        func u64(_ o: Int) -> UInt64 { bytes[o..<(o + 8)].reversed().reduce(0) { $0 << 8 | UInt64($1) } }
        XCTAssertEqual(bytes.count, Int(h.fileSize))
        XCTAssertEqual(Array(bytes.prefix(8)), [0x89, 0x4C, 0x4B, 0x44, 0x0D, 0x0A, 0x1A, 0x0A])
        let end = Int(h.contentEnd), table = Int(h.checksumTableOffset), root = Int(h.rootTableOffset)
        XCTAssertEqual(u64(table), XXH64.hash(Array(bytes[256..<end]), seed: 0), "block 0, seeded with its number")
        XCTAssertEqual(u64(root), XXH64.hash(Array(bytes[table..<root]), seed: 1 << 63), "table block 0")
        XCTAssertEqual(XXH64.hash(Array(bytes[root...])), h.contentChecksum, "the root of the tree")
        XCTAssertEqual(XXH64.hash(Array(bytes[0..<248])), h.headerChecksum)
        XCTAssertEqual(Array(bytes[136..<152]), [UInt8](repeating: 0, count: 16), "no journal merged")
        // The numbering plan (docs/FORMAT.md): version 1, flags (bit 0: the built-in
        // default), region, calling code, reserved, the two fingerprints.
        XCTAssertEqual(Array(bytes[152..<160]), [1, 1, UInt8(ascii: "C"), UInt8(ascii: "N"), 86, 0, 0, 0])
        XCTAssertEqual(h.plan, RecordedPlan(.china, metadata: NumberingData.installed.fingerprint))
        XCTAssertEqual(u64(168) & 0xFFFF_FFFF, 12)
        XCTAssertEqual(u64(176), h.contentEnd)
        XCTAssertEqual(u64(184), 1)
        XCTAssertEqual(u64(192), h.checksumTableOffset)
        XCTAssertEqual(u64(200), h.rootTableOffset)
        XCTAssertEqual(u64(208), 1)
        XCTAssertEqual(Array(bytes[216..<248]), [UInt8](repeating: 0, count: 32), "reserved header bytes are zero")
        XCTAssertEqual(directory.label(0), "Bank")
        XCTAssertEqual(directory.label(2), "Range")
        XCTAssertEqual(directory.label(3), "", "out-of-range label number")
    }

    func testWriterRefusesBrokenContent() throws {
        func refused(_ c: DirectoryContent, _ reason: String, line: UInt = #line) {
            let path = folder.file("bad.lkd")
            XCTAssertThrowsError(try DirectoryWriter.write(c, to: path), line: line) { error in
                XCTAssertEqual("\(error)", "\(path): corrupt directory: refusing to write: \(reason)", line: line)
            }
            XCTAssertFalse(FileManager.default.fileExists(atPath: path), line: line)
        }
        var c = DirectoryContent()
        c.exactKeys = [8613800138001, 8613800138000]
        c.exactValues = [1, 1]
        refused(c, "exact keys not strictly ascending at index 1")
        c.exactKeys = [8613800138000, 8613800138000]
        refused(c, "exact keys not strictly ascending at index 1")
        c.exactKeys = [8613800138000]
        refused(c, "keys and values differ in count")
        c.exactValues = [0]
        refused(c, "an entry neither blocks nor identifies")
        c.exactValues = [DirectoryFormat.encodeValue(blocked: false, label: 0)]
        refused(c, "an entry refers to a missing label")
        c.labels = [Array("b".utf8), Array("a".utf8)]
        refused(c, "labels not strictly ascending at index 1")
        c.labels = [Array("a\nb".utf8)]
        refused(c, "label 0: label contains the control character U+000A")
        c.labels = [Array("ok".utf8)]
        c.exactKeys = [0]
        refused(c, "+0 is not an E.164 number")
        c.exactKeys = [8613800138000]
        c.prefixKeys = [5 << 56 | 86]
        c.prefixValues = [1]
        refused(c, "prefix key 0 is not a valid prefix")
        // No temporary files are left behind.
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path), [])
    }

    func testWriterReplacesAtomicallyAndLeavesNoTemporaryFiles() throws {
        let path = folder.file("dir.lkd")
        try DirectoryWriter.write(sampleContent(10), to: path)
        let old = try DirectoryFile(path: path)
        try DirectoryWriter.write(sampleContent(20), to: path)
        // The old mapping still reads the old file; a new open sees the new one.
        XCTAssertEqual(old.count, 10)
        XCTAssertNotNil(try old.lookup(PhoneNumber(value: 8613800000000 + 9 * 7)!))
        XCTAssertEqual(try DirectoryFile(path: path).count, 20)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path), ["dir.lkd"])
    }

    func testWriterReportsAMissingFolder() {
        let path = folder.file("no/such/folder/dir.lkd")
        XCTAssertThrowsError(try DirectoryWriter.write(sampleContent(1), to: path)) { error in
            XCTAssertTrue("\(error)".contains("cannot create"), "\(error)")
            XCTAssertTrue("\(error)".contains("No such file or directory"), "\(error)")
        }
    }

    func testSameEntriesGiveTheSameBytes() throws {
        // Line order, number spelling, duplicates and unused labels must not matter.
        let a = "number,action,label\n+8613800138000,block,Spam\n+8613800138001,identify,Bank\n+86170*,block,\n"
        let b = "label,number,action\nBank,013800138001,identify\n,0170*,block\nSpam,13800138000,block\nSpam,+8613800138000,block\n"
        try DirectoryWriter.write(try content([Source("a.csv", .csv, a)]), to: folder.file("a.lkd"))
        try DirectoryWriter.write(try content([Source("b.csv", .csv, b)]), to: folder.file("b.lkd"))
        XCTAssertEqual(readBytes(folder.file("a.lkd")), readBytes(folder.file("b.lkd")))
    }

    func testManyDistinctLabels() throws {
        // Enough labels to make the interner grow several times.
        var csv = "number,action,label\n"
        for i in 0..<5000 { csv += "+86138\(String(format: "%08d", i)),identify,Label number \(i)\n" }
        let c = try content([Source("dir.csv", .csv, csv)])
        XCTAssertEqual(c.labels.count, 5000)
        let directory = try writeAndOpen(c, in: folder)
        XCTAssertNoThrow(try directory.verify())
        for i in stride(from: 0, to: 5000, by: 37) {
            let entry = try directory.lookup(number("+86138\(String(format: "%08d", i))"))
            XCTAssertEqual(entry.flatMap { $0.label }.map { directory.label($0) }, "Label number \(i)")
        }
    }

    func testEmptyDirectory() throws {
        let directory = try writeAndOpen(DirectoryContent(), in: folder)
        XCTAssertEqual(directory.count, 0)
        // Header, no node, label index word 0 (padded to 8), one block
        // checksum and one root entry.
        XCTAssertEqual(directory.header.fileSize, 280)
        XCTAssertNil(try directory.lookup(number("+8613800138000")))
        XCTAssertEqual(entries(of: directory), [])
        XCTAssertNoThrow(try directory.verify())
    }

    func testValueWordEncoding() {
        XCTAssertEqual(DirectoryFormat.encodeValue(blocked: true, label: nil), 1)
        XCTAssertEqual(DirectoryFormat.encodeValue(blocked: false, label: 0), 2)
        XCTAssertEqual(DirectoryFormat.encodeValue(blocked: true, label: 4), 11)
        XCTAssertEqual(DirectoryFormat.prefixKey(prefix("+86170*")), 5 << 56 | 86170)
    }
}
