import Foundation
import XCTest
@testable import Directory

/// Damaged, truncated and foreign files: always a clear error, never a crash.
final class CorruptionTests: XCTestCase {
    var folder: TemporaryFolder!
    var good: [UInt8] = []
    var header: DirectoryHeader!

    override func setUpWithError() throws {
        folder = TemporaryFolder("lookupd-corrupt")
        var csv = "number,action,label\n"
        for i in 0..<100 { csv += "+86138001\(String(format: "%05d", i * 3)),\(i % 2 == 0 ? "block" : "identify"),Label \(i % 7)\n" }
        csv += "+86170*,block,Virtual\n+861705555*,identify,Known\n"
        let path = folder.file("good.lkd")
        // Version 2: the slot checks below are written for binary order;
        // testVerifyChecksNodeStructure covers version 4.
        try DirectoryWriter.write(try content([Source("dir.csv", .csv, csv)]), to: path, formatVersion: 2)
        good = readBytes(path)
        header = try DirectoryFile(path: path).header
    }

    override func tearDown() { folder.cleanup() }

    enum Cut { case truncatedHeader, truncatedBody }

    func write(_ name: String, _ bytes: [UInt8]) -> String { folder.write(name, bytes) }

    /// Recomputes the block, content and header checksums, as a tool forging
    /// a structurally bad but checksum-clean file would.
    func resealed(_ bytes: [UInt8]) -> [UInt8] {
        var b = bytes
        DirectoryWriter.resealForTesting(&b)
        return b
    }

    func put32(_ bytes: inout [UInt8], _ offset: Int, _ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { for i in 0..<4 { bytes[offset + i] = $0[i] } }
    }

    func put64(_ bytes: inout [UInt8], _ offset: Int, _ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { for i in 0..<8 { bytes[offset + i] = $0[i] } }
    }

    func testGoodFileIsGood() throws {
        let directory = try DirectoryFile(path: folder.file("good.lkd"))
        XCTAssertNoThrow(try directory.verify())
        XCTAssertEqual(directory.count, 100)
        XCTAssertGreaterThan(good.count, 1200)
    }

    func testWrongMagic() {
        var bytes = good
        bytes[1] = UInt8(ascii: "X")
        let path = write("magic.lkd", bytes)
        XCTAssertEqual(openError(path), .notADirectory(path: path))
        XCTAssertEqual(openError(path)?.description, "\(path): not a lookupd directory (bad magic number)")

        let text = write("notes.lkd", Array(String(repeating: "number,action,label\n", count: 20).utf8))
        XCTAssertEqual(openError(text), .notADirectory(path: text))
        let short = write("short.lkd", Array("hi\n".utf8))
        XCTAssertEqual(openError(short), .notADirectory(path: short))
        // A compiled file's sibling CSV passed by mistake.
        let csv = write("dir.csv", Array("number\n+8613800138000\n".utf8))
        XCTAssertEqual(openError(csv)?.description, "\(csv): not a lookupd directory (bad magic number)")
    }

    func testTruncatedAtSeveralOffsets() {
        let size = good.count
        let midKeys = Int(header.keysOffset) + (Int(header.valuesOffset) - Int(header.keysOffset)) / 2
        let cases: [(Int, Cut)] = [
            (0, .truncatedHeader), (1, .truncatedHeader), (7, .truncatedHeader), (8, .truncatedHeader),
            (11, .truncatedHeader), (12, .truncatedHeader), (100, .truncatedHeader), (255, .truncatedHeader),
            (256, .truncatedBody), (midKeys, .truncatedBody), (Int(header.labelDataOffset) + 1, .truncatedBody),
            (size - 1, .truncatedBody),
        ]
        for (length, kind) in cases {
            let path = write("cut\(length).lkd", Array(good.prefix(length)))
            let error = openError(path)
            switch kind {
            case .truncatedHeader:
                XCTAssertEqual(error, .truncated(path: path, expected: nil, actual: length), "cut at \(length)")
                XCTAssertEqual(error?.description, "\(path): truncated: \(length) bytes is too short for a directory header")
            case .truncatedBody:
                XCTAssertEqual(error, .truncated(path: path, expected: UInt64(size), actual: length), "cut at \(length)")
                XCTAssertEqual(error?.description, "\(path): truncated: \(length) bytes, the header says \(size)")
            }
        }
    }

    func testEveryTruncationIsRefusedWithoutCrashing() {
        let path = folder.file("cut.lkd")
        for length in 0..<good.count {
            _ = FileManager.default.createFile(atPath: path, contents: Data(good.prefix(length)))
            guard let error = openError(path) else { continue }
            guard case .truncated = error else { return XCTFail("cut at \(length): \(error)") }
        }
    }

    func testTrailingGarbage() {
        let path = write("long.lkd", good + [0])
        XCTAssertEqual(openError(path)?.description,
                       "\(path): corrupt directory: file has \(good.count + 1) bytes but its header says \(good.count)")
    }

    func testFlippedContentByteIsABlockChecksumMismatch() throws {
        // The whole content fits one 4 KiB block here.
        let contentEnd = Int(header.contentEnd)
        let offsets = [256, Int(header.keysOffset) + 13, Int(header.valuesOffset) + 5, Int(header.prefixesOffset) + 2,
                       Int(header.labelIndexOffset) + 4, Int(header.labelDataOffset) + 3, contentEnd - 1]
        let all = "keys, values, prefix rules, label index, label data"
        for offset in offsets {
            var bytes = good
            bytes[offset] ^= 0x10
            let path = write("flip\(offset).lkd", bytes)
            let expected = DirectoryError.damagedBlock(path: path, offset: 256, length: contentEnd - 256, sections: all)
            XCTAssertEqual(verifyError(path), expected, "byte \(offset)")
            XCTAssertEqual(verifyError(path)?.description,
                           "\(path): damaged: bytes 256...\(contentEnd - 1) (\(all)) do not match their checksum (the file is damaged)")
            // A lookup refuses too, without verify(): it checks what it reads.
            let directory = try DirectoryFile(path: path)
            XCTAssertThrowsError(try directory.lookup(number("+8613800100000"))) { XCTAssertEqual($0 as? DirectoryError, expected) }
            XCTAssertEqual(directory.damage, expected)
            XCTAssertEqual(directory.verifyBlocks().total, 1)
        }
        // The checksum table: found when the block it covers is first touched.
        var bytes = good
        bytes[Int(header.checksumTableOffset) + 2] ^= 0x01
        let table = write("table.lkd", bytes)
        XCTAssertEqual(verifyError(table)?.description,
                       "\(table): damaged: bytes \(header.checksumTableOffset)...\(header.checksumTableOffset + 7) (checksum table) do not match their checksum (the file is damaged)")
        // The root table: found when the file is opened.
        bytes = good
        bytes[good.count - 1] ^= 0x01
        let root = write("root.lkd", bytes)
        XCTAssertEqual(openError(root)?.description,
                       "\(root): damaged: bytes \(header.rootTableOffset)...\(good.count - 1) (root table) do not match their checksum (the file is damaged)")
    }

    /// Version-1 files (one checksum over the content) are still read, and
    /// verified completely before the first answer.
    func testVersionOneFilesAreVerifiedWhole() throws {
        let path = folder.file("v1.lkd")
        try DirectoryWriter.write(try content([Source("dir.csv", .csv, "number,action,label\n+8613800138000,block,Fraud\n+86170*,identify,Virtual\n")]),
                                  to: path, formatVersion: 1)
        let v1 = try DirectoryFile(path: path)
        XCTAssertEqual(v1.header.formatVersion, 1)
        XCTAssertNil(v1.verifier)
        XCTAssertFalse(v1.isFullyVerified)
        XCTAssertEqual(try v1.lookup(number("+8613800138000"))?.blocked, true)
        XCTAssertTrue(v1.isFullyVerified, "the first lookup verified the whole file")
        XCTAssertEqual(try v1.lookup(number("+8617012345678")).map { v1.label($0.label!) }, "Virtual")

        var bytes = readBytes(path)
        bytes[bytes.count - 3] ^= 0x20
        let damaged = write("v1-damaged.lkd", bytes)
        let file = try DirectoryFile(path: damaged)
        XCTAssertThrowsError(try file.lookup(number("+8613800138000"))) {
            XCTAssertEqual($0 as? DirectoryError, .contentChecksumMismatch(path: damaged))
        }
        XCTAssertEqual(file.damage, .contentChecksumMismatch(path: damaged))
        XCTAssertEqual(verifyError(damaged), .contentChecksumMismatch(path: damaged))
        XCTAssertEqual(file.verifyBlocks().total, 1)
    }

    /// A file of many blocks with one damaged: lookups that read only sound
    /// blocks answer, those that read the damaged one throw, every time.
    func testOneDamagedBlockAmongMany() throws {
        var c = DirectoryContent()
        c.exactKeys = (0..<20_000).map { 8613800000000 + UInt64($0) * 3 }
        c.exactValues = c.exactKeys.map { $0 % 2 == 0 ? 1 : 2 }
        c.labels = [Array("Courier".utf8)]
        let path = folder.file("big.lkd")
        try DirectoryWriter.write(c, to: path, blockShift: 9)
        let sound = try DirectoryFile(path: path)
        XCTAssertGreaterThan(sound.header.blockCount, 400)
        // Damage the slot of one key near the leaves: few lookups pass through it.
        var bytes = readBytes(path)
        let slot = 19_000
        bytes[Int(sound.header.keysOffset) + 8 * slot] ^= 0x04
        let damagedPath = write("big-damaged.lkd", bytes)
        let file = try DirectoryFile(path: damagedPath)
        var answered = 0, refused = 0
        for key in c.exactKeys {
            do {
                let entry = try file.lookup(PhoneNumber(value: key)!)
                XCTAssertEqual(entry?.blocked, key % 2 == 0, "+\(key)")
                answered += 1
            } catch {
                guard case .damagedBlock(_, let offset, let length, "keys") = error else { return XCTFail("\(error)") }
                XCTAssertTrue((offset..<(offset + length)).contains(Int(sound.header.keysOffset) + 8 * slot))
                refused += 1
            }
        }
        XCTAssertGreaterThan(answered, 19_000)
        XCTAssertGreaterThan(refused, 0)
        XCTAssertNotNil(file.damage)
        XCTAssertFalse(file.isFullyVerified)
        let blocks = file.verifyBlocks()
        XCTAssertEqual(blocks.total, 1)
        XCTAssertThrowsError(try file.verify())
        XCTAssertThrowsError(try file.forEachEntry { _ in })
    }

    /// First touches from many threads at once agree, and mark every block.
    func testConcurrentFirstTouches() throws {
        var c = DirectoryContent()
        c.exactKeys = (0..<50_000).map { 8613800000000 + UInt64($0) * 7 }
        c.exactValues = c.exactKeys.map { _ in 1 }
        let path = folder.file("threads.lkd")
        try DirectoryWriter.write(c, to: path, blockShift: 9)
        let file = try DirectoryFile(path: path)
        let misses = FailureCount()
        let keys = c.exactKeys
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for i in stride(from: t, to: keys.count, by: 3) {
                if (try? file.lookup(PhoneNumber(value: keys[i])!))??.blocked != true { misses.add() }
            }
        }
        XCTAssertEqual(misses.value, 0)
        XCTAssertNil(file.damage)
        // Every keys and values block was read by some lookup.
        let keyBlocks = (Int(file.header.prefixesOffset) - 256) >> 9
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(file.verifier).verifiedBlockCount, keyBlocks)
        XCTAssertEqual(file.verifyBlocks().total, 0)
        XCTAssertTrue(file.isFullyVerified)
    }

    /// An unverified damaged file must never crash a lookup, the iteration or a label read.
    func testDamagedContentNeverCrashesReaders() throws {
        let path = folder.file("fuzz.lkd")
        let probes = (0..<100).map { number("+86138001\(String(format: "%05d", $0 * 3))") }
            + [number("+8617055550000"), number("+8617000000000"), number("+12125550100")]
        var rng = SeededRandom(seed: 42)
        for offset in 256..<good.count {
            var bytes = good
            bytes[offset] ^= UInt8.random(in: 1...255, using: &rng)
            _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
            // A flip in the root table is refused when opening.
            guard let directory = try? DirectoryFile(path: path) else { continue }
            XCTAssertThrowsError(try directory.verify(), "byte \(offset)")
            for probe in probes {
                if let entry = try? directory.lookup(probe), let label = entry.label {
                    XCTAssertLessThanOrEqual(directory.labelBytes(label).count, 255)
                }
            }
            try? directory.forEachEntry { entry in
                if let label = entry.label { _ = directory.label(label) }
            }
        }
    }

    func testFlippedHeaderByte() {
        // Any byte of the header outside the magic and version fields: the
        // header checksum catches it.
        for offset in 12..<256 {
            var bytes = good
            bytes[offset] ^= 0x01
            let path = write("h.lkd", bytes)
            XCTAssertEqual(openError(path), .headerChecksumMismatch(path: path), "byte \(offset)")
        }
        var bytes = good
        bytes[40] ^= 0x80
        let path = write("h40.lkd", bytes)
        XCTAssertEqual(openError(path)?.description, "\(path): header checksum mismatch (the file is damaged)")
        // Magic bytes: not ours. Version bytes: an unknown version.
        for offset in 0..<8 {
            var bytes = good
            bytes[offset] ^= 0x01
            let path = write("m.lkd", bytes)
            XCTAssertEqual(openError(path), .notADirectory(path: path), "byte \(offset)")
        }
    }

    func testUnsupportedVersion() {
        for version: UInt32 in [0, 5, 0xFFFF_FFFF] {
            var bytes = good
            put32(&bytes, 8, version)
            let path = write("v\(version).lkd", resealed(bytes))
            XCTAssertEqual(openError(path), .unsupportedVersion(path: path, version: version))
            XCTAssertEqual(openError(path)?.description,
                           "\(path): unsupported directory format version \(version) (this lookupd reads versions 1 to 4)")
        }
        // A future version's header may be longer or shorter: the version is
        // reported even when the file is too short for a version 2 header.
        var head = Array(good.prefix(64))
        put32(&head, 8, 5)
        let path = write("v5short.lkd", head)
        XCTAssertEqual(openError(path), .unsupportedVersion(path: path, version: 5))
        // Each version has its one key order: binary-order flags on a version-4 file (or
        // the reverse) is refused, never read in the wrong order.
        var nodesFlagOnV2 = good
        put32(&nodesFlagOnV2, 128, 2)
        let wrongOrder = write("v2nodes.lkd", resealed(nodesFlagOnV2))
        XCTAssertEqual(openError(wrongOrder)?.description, "\(wrongOrder): corrupt directory: unknown flags 0x2")
    }

    func testEmptyFileFolderAndMissingFile() {
        let empty = write("empty.lkd", [])
        XCTAssertEqual(openError(empty), .truncated(path: empty, expected: nil, actual: 0))
        XCTAssertEqual(openError(folder.path)?.description, "\(folder.path): corrupt directory: not a regular file")
        let missing = folder.file("missing.lkd")
        XCTAssertEqual(openError(missing), .system(path: missing, operation: "open", errno: ENOENT))
        XCTAssertEqual(openError(missing)?.description, "\(missing): cannot open: No such file or directory")
    }

    /// Headers with a valid checksum but impossible fields.
    func testInconsistentHeaders() {
        func check(_ name: String, _ patch: (inout [UInt8]) -> Void, _ reason: String, line: UInt = #line) {
            var bytes = good
            patch(&bytes)
            let path = write(name, resealed(bytes))
            XCTAssertEqual(openError(path, line: line)?.description, "\(path): corrupt directory: \(reason)", line: line)
        }
        check("hsize.lkd", { put32(&$0, 12, 128) }, "header size 128 is not 256")
        check("flags.lkd", { put32(&$0, 128, 0) }, "unknown flags 0x0")
        check("mask.lkd", { put32(&$0, 132, 1) }, "prefix length mask names lengths outside 1...15")
        check("mask16.lkd", { put32(&$0, 132, 1 << 16) }, "prefix length mask names lengths outside 1...15")
        check("count.lkd", { put64(&$0, 32, self.header.entryCount + 1) }, "section offsets do not match the counts in the header")
        check("huge.lkd", { put64(&$0, 32, UInt64.max) }, "section offsets do not match the counts in the header")
        check("keys.lkd", { put64(&$0, 72, 264) }, "section offsets do not match the counts in the header")
        check("labels.lkd", { put64(&$0, 48, UInt64(Int32.max)) }, "label count 2147483647 exceeds the format's limit")
        check("blocked.lkd", { put64(&$0, 56, 1000) }, "blocked/identified counts exceed the entry count")
        check("shift.lkd", { put32(&$0, 168, 8) }, "block size 2^8 is outside 2^9...2^20")
        check("reserved172.lkd", { put32(&$0, 172, 1) }, "reserved header bytes are not zero")
        check("reserved240.lkd", { $0[240] = 1 }, "reserved header bytes are not zero")
        check("table.lkd", { put64(&$0, 192, self.header.checksumTableOffset + 8) }, "section offsets do not match the counts in the header")
        check("blocks.lkd", { put64(&$0, 184, self.header.blockCount + 1) }, "section offsets do not match the counts in the header")
        var bytes = good
        put64(&bytes, 16, UInt64(good.count) * 2)
        let path = write("fsize.lkd", resealed(bytes))
        XCTAssertEqual(openError(path), .truncated(path: path, expected: UInt64(good.count) * 2, actual: good.count))
    }

    /// Version 4 with valid checksums but broken structure: the padding of the last node,
    /// the count in the header and the order of the nodes are all checked.
    func testVerifyChecksNodeStructure() throws {
        let path = folder.file("nodes.lkd")
        let source = try DirectoryFile(path: folder.file("good.lkd"))
        var c = DirectoryContent()
        c.labels = (0..<source.labelTableCount).map { Array(source.label(UInt32($0)).utf8) }
        try source.forEachExactInOrder { key, value in c.exactKeys.append(key); c.exactValues.append(value) }
        try DirectoryWriter.write(c, to: path)
        let nodes = readBytes(path)
        let h = try DirectoryFile(path: path).header
        XCTAssertEqual(h.formatVersion, 4)
        XCTAssertEqual(h.entryCount, 100)
        let keys = Int(h.keysOffset), values = Int(h.valuesOffset)
        // In-order slot of each number, then of the padding (100 numbers: 13 nodes, 4 padding slots).
        var walk = KeyNodes.InOrder(nodeCount: 13)
        var order: [Int] = []
        while !walk.isDone { order.append(walk.slot); walk.advance() }
        XCTAssertEqual(order.count, 104)
        XCTAssertEqual(Set(order).count, 104)
        func check(_ name: String, _ patch: (inout [UInt8]) -> Void, _ reason: String, line: UInt = #line) {
            var bytes = nodes
            patch(&bytes)
            let path = write(name, resealed(bytes))
            XCTAssertEqual(verifyError(path, line: line)?.description, "\(path): corrupt directory: \(reason)", line: line)
        }
        func key(_ i: Int) -> UInt64 {
            nodes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: keys + 8 * order[i], as: UInt64.self)) }
        }
        check("n-dup.lkd", { put64(&$0, keys + 8 * order[50], key(49)) }, "duplicate number +\(key(49))")
        check("n-order.lkd", { put64(&$0, keys + 8 * order[50], key(49) - 1) }, "numbers not in ascending order at +\(key(49) - 1)")
        check("n-pad.lkd", { put64(&$0, keys + 8 * order[100], key(99) + 1) }, "padding slot \(order[100]) after the last number is not padding")
        check("n-padlast.lkd", { put64(&$0, keys + 8 * order[103], key(99) + 1) }, "padding slot \(order[103]) after the last number is not padding")
        check("n-padvalue.lkd", { put32(&$0, values + 4 * order[101], 1) }, "padding slot \(order[101]) after the last number is not padding")
        check("n-count.lkd", { put64(&$0, 32, 101) }, "slot \(order[100]) is padding where the header counts 101 numbers")
        // A count within the same node count opens (the layout is the same) and still answers
        // every number it holds; `export` and `verify` refuse it.
        var bytes = nodes
        put64(&bytes, 32, 101)
        let miscounted = try DirectoryFile(path: write("n-count2.lkd", resealed(bytes)))
        XCTAssertEqual(try miscounted.lookup(PhoneNumber(value: key(7))!)?.match, .exact(PhoneNumber(value: key(7))!))
        XCTAssertThrowsError(try miscounted.forEachExactInOrder { _, _ in })
    }

    /// Content with valid checksums but broken structure: `verify()` finds it.
    func testVerifyChecksStructure() {
        let keys = Int(header.keysOffset), values = Int(header.valuesOffset)
        let prefixes = Int(header.prefixesOffset), labelIndex = Int(header.labelIndexOffset)
        let labelData = Int(header.labelDataOffset)
        func check(_ name: String, _ patch: (inout [UInt8]) -> Void, _ reason: String, line: UInt = #line) {
            var bytes = good
            patch(&bytes)
            let path = write(name, resealed(bytes))
            XCTAssertEqual(verifyError(path, line: line)?.description, "\(path): corrupt directory: \(reason)", line: line)
        }
        func key(_ b: [UInt8], _ k: Int) -> UInt64 {
            b.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: keys + 8 * k, as: UInt64.self)) }
        }
        check("slot0.lkd", { put64(&$0, keys, 5) }, "unused slot 0 is not zero")
        // The root's in-order successor is the leftmost slot of its right subtree.
        var successor = 3
        while 2 * successor <= 100 { successor *= 2 }
        let root = key(good, 1)
        check("dup.lkd", { put64(&$0, keys + 8 * successor, root) }, "duplicate number +\(root)")
        check("order.lkd", { put64(&$0, keys + 8 * successor, root - 1) }, "numbers not in ascending order at +\(root - 1)")
        check("e164.lkd", { b in
            // The smallest key (leftmost slot) replaced by 0 is still ascending but not E.164.
            var k = 1
            while 2 * k <= 100 { k *= 2 }
            put64(&b, keys + 8 * k, 0)
        }, "+0 is not a valid E.164 number")
        check("value0.lkd", { put32(&$0, values + 4, 0) }, "entry +\(key(good, 1)): neither blocks nor identifies")
        check("label99.lkd", { put32(&$0, values + 4, 99 << 1) }, "entry +\(key(good, 1)): label number 98 is past the label table")
        check("reserved.lkd", { put32(&$0, prefixes + 12, 1) }, "prefix rule 0: reserved word is not zero")
        check("pvalue.lkd", { put32(&$0, prefixes + 8, 0) }, "prefix rule 0: neither blocks nor identifies")
        check("pkey.lkd", { put64(&$0, prefixes, 5 << 56 | 86) }, "prefix rule 0 is not a valid prefix")
        check("porder.lkd", { put64(&$0, prefixes + 16, 5 << 56 | 86170) }, "prefix rules not in ascending order at rule 1")
        check("pmask.lkd", { put64(&$0, prefixes + 16, 8 << 56 | 86170555) }, "prefix length mask does not match the prefix rules")
        check("counts.lkd", { put32(&$0, values + 4, $0.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: values + 4, as: UInt32.self)) } ^ 1) },
              "blocked/identified counts do not match the entries")
        check("lindex.lkd", { put32(&$0, labelIndex, 1) }, "label index does not span the label data")
        check("lempty.lkd", { put32(&$0, labelIndex + 4, 0) }, "label 0 has bad offsets")
        check("lctrl.lkd", { $0[labelData + 1] = 0x0A }, "label 0: label contains the control character U+000A")
        check("lutf8.lkd", { $0[labelData + 1] = 0xFF }, "label 0: label is not valid UTF-8")
        check("lorder.lkd", { $0[labelData] = UInt8(ascii: "Z") }, "labels not in ascending order at label 1")
    }
}
