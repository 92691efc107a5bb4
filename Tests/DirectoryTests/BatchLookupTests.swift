import Foundation
import XCTest
@testable import Directory

/// `lookupBatch` answers exactly as `lookup` does, number by number: over hits, misses and
/// prefix rules, in verified and unverified files, with damaged blocks (the same lookups
/// throw, with the same errors) and with a guarded mapping marked damaged, at every batch
/// size around the interleaving width.
final class BatchLookupTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder("lookupd-batch") }
    override func tearDown() { folder?.cleanup() }

    /// 20,000 entries in 512-byte blocks (hundreds of blocks, so one damaged block fails few
    /// lookups), labelled and blocking ones, allow entries, and prefix rules covering some misses.
    func sampleContent() -> DirectoryContent {
        var c = DirectoryContent()
        var rng = SystemRandomNumberGenerator()
        var keys = Set<UInt64>()
        while keys.count < 20_000 { keys.insert(8613800000000 + UInt64.random(in: 0..<2_000_000, using: &rng)) }
        c.exactKeys = keys.sorted()
        c.labels = (0..<50).map { Array("Label \(1000 + $0)".utf8) }
        c.exactValues = c.exactKeys.indices.map { i in
            switch i % 4 {
            case 0: return DirectoryFormat.encodeValue(blocked: true, label: nil)
            case 1: return DirectoryFormat.encodeValue(blocked: true, label: UInt32(i % 50))
            case 2: return DirectoryFormat.encodeValue(blocked: false, label: UInt32(i % 50))
            default: return DirectoryFormat.encodeValue(blocked: false, label: nil, allowed: true)
            }
        }
        // 86138001* and 8613801* cover part of the key range, so misses there end in a rule.
        c.prefixKeys = [DirectoryFormat.prefixKey(NumberPrefix(digits: 8613801, length: 7)!),
                        DirectoryFormat.prefixKey(NumberPrefix(digits: 86138001, length: 8)!)]
        c.prefixValues = [DirectoryFormat.encodeValue(blocked: true, label: 3),
                          DirectoryFormat.encodeValue(blocked: false, label: 7)]
        XCTAssertNil(c.invariantViolation())
        return c
    }

    /// Members, non-members inside and beside the key range, below the first and above the last key.
    func probes(_ c: DirectoryContent, count: Int) -> [PhoneNumber] {
        var rng = SystemRandomNumberGenerator()
        var out: [PhoneNumber] = [PhoneNumber(value: c.exactKeys[0])!, PhoneNumber(value: c.exactKeys.last!)!,
                                  PhoneNumber(value: c.exactKeys[0] - 1)!, PhoneNumber(value: c.exactKeys.last! + 1)!]
        while out.count < count {
            let value: UInt64
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: value = c.exactKeys.randomElement(using: &rng)!
            case 1: value = 8613800000000 + UInt64.random(in: 0..<2_100_000, using: &rng)
            default: value = UInt64.random(in: 1_000_000..<999_999_999_999_999, using: &rng)
            }
            out.append(PhoneNumber(value: value)!)
        }
        return out
    }

    /// `c` written in 512-byte blocks and copied with one bit flipped at each offset that
    /// `offsets` picks from the header: the copy's path.
    func damagedFile(_ c: DirectoryContent, _ offsets: (DirectoryHeader) -> [Int]) throws -> String {
        let path = folder.file("good.lkd")
        try DirectoryWriter.write(c, to: path, blockShift: 9)
        var bytes = readBytes(path)
        for offset in offsets(try DirectoryFile(path: path).header) { bytes[offset] ^= 0x04 }
        return folder.write("damaged.lkd", bytes)
    }

    func single(_ file: DirectoryFile, _ numbers: [PhoneNumber]) -> [Result<DirectoryEntry?, DirectoryError>] {
        numbers.map { number in Result { () throws(DirectoryError) in try file.lookup(number) } }
    }

    func batched(_ file: DirectoryFile, _ numbers: [PhoneNumber]) -> [Result<DirectoryEntry?, DirectoryError>] {
        var results = [Result<DirectoryEntry?, DirectoryError>](repeating: .success(nil), count: numbers.count)
        numbers.withUnsafeBufferPointer { n in results.withUnsafeMutableBufferPointer { file.lookupBatch(n, into: $0) } }
        return results
    }

    func assertSame(_ expected: [Result<DirectoryEntry?, DirectoryError>], _ got: [Result<DirectoryEntry?, DirectoryError>],
                    _ numbers: [PhoneNumber], _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(expected.count, got.count, what, file: file, line: line)
        var wrong = 0
        for i in numbers.indices where expected[i] != got[i] {
            wrong += 1
            if wrong <= 3 { XCTFail("\(what): +\(numbers[i].value): single \(expected[i]), batched \(got[i])", file: file, line: line) }
        }
        XCTAssertEqual(wrong, 0, what, file: file, line: line)
    }

    func testBatchedAnswersAsSingleInEveryBatchSize() throws {
        let c = sampleContent()
        let path = folder.file("batch.lkd")
        try DirectoryWriter.write(c, to: path, blockShift: 9)
        let numbers = probes(c, count: 4_000)
        let expected = single(try DirectoryFile(path: path), numbers)
        XCTAssertGreaterThan(expected.filter { kind($0) == "exact" }.count, 1000)
        XCTAssertGreaterThan(expected.filter { kind($0) == "prefix" }.count, 100)
        XCTAssertGreaterThan(expected.filter { kind($0) == "none" }.count, 1000)

        // Fresh (every slot checked as it is read) and fully verified (no checks).
        for verified in [false, true] {
            let file = try DirectoryFile(path: path)
            if verified { try file.verify() }
            for width in 1...33 {
                let slice = Array(numbers.prefix(width * 3 + 1))
                assertSame(Array(expected.prefix(slice.count)), batched(file, slice), slice, "verified \(verified), \(slice.count) numbers")
            }
            assertSame(expected, batched(file, numbers), numbers, "verified \(verified), all")
            XCTAssertTrue(file.isFullyVerified || !verified)
        }
    }

    /// A damaged key slot near the leaves and a damaged value slot: the same lookups throw the
    /// same errors batched as one by one, and the others in their batches still answer.
    func testDamagedBlocksFailTheSameLookups() throws {
        let c = sampleContent()
        let damaged = try damagedFile(c) { [Int($0.keysOffset) + 8 * 19_000, Int($0.valuesOffset) + 4 * 5_000] }

        // Members around both damaged slots, so some batches mix failing and answering lookups.
        var numbers = probes(c, count: 3_000)
        let byIndex = c.exactKeys
        numbers += (0..<2_000).map { PhoneNumber(value: byIndex[($0 * 10) % byIndex.count])! }
        let expected = single(try DirectoryFile(path: damaged), numbers)
        let failing = expected.indices.filter { kind(expected[$0]) == "error" }
        XCTAssertGreaterThan(failing.count, 0)
        XCTAssertLessThan(failing.count, numbers.count / 10)
        let keyFailures = failing.filter { if case .failure(.damagedBlock(_, _, _, "keys")) = expected[$0] { return true } else { return false } }
        XCTAssertGreaterThan(keyFailures.count, 0, "a search through the damaged key slot")
        XCTAssertGreaterThan(failing.count, keyFailures.count, "a hit on the damaged value slot")

        for width in [1, 7, 32, 33] {
            let file = try DirectoryFile(path: damaged)
            var got: [Result<DirectoryEntry?, DirectoryError>] = []
            var start = 0
            while start < numbers.count {
                let end = min(numbers.count, start + width)
                got += batched(file, Array(numbers[start..<end]))
                start = end
            }
            assertSame(expected, got, numbers, "damaged, batches of \(width)")
            XCTAssertNotNil(file.damage)
            XCTAssertFalse(file.isFullyVerified)
        }
    }

    /// The prefetch descent reads without checking, so it must not count as verification:
    /// afterwards a lookup through a damaged block still throws.
    func testPrefetchVerifiesNothing() throws {
        let c = sampleContent()
        let damaged = try damagedFile(c) { [Int($0.keysOffset) + 8 * 19_000] }
        let numbers = probes(c, count: 2_000)
        let expected = single(try DirectoryFile(path: damaged), numbers)

        let file = try DirectoryFile(path: damaged)
        numbers.withUnsafeBufferPointer { file.prefetchBatch($0) }
        XCTAssertEqual(file.verifier?.verifiedBlockCount, 0)
        assertSame(expected, single(file, numbers), numbers, "after prefetchBatch")
    }

    /// A guarded mapping marked damaged (as the SIGBUS guard or the change watch does): every
    /// lookup of the batch refuses, as each single lookup does.
    func testGuardedMappingMarkedDamagedRefusesTheBatch() throws {
        try skipUnderSanitizer("registers the SIGBUS guard, which a sanitizer's own handler does not share")
        let c = sampleContent()
        let path = folder.file("guarded.lkd")
        try DirectoryWriter.write(c, to: path)
        // Served as the daemon serves an installed file (a bad descriptor makes the init throw).
        let fd = open(path, O_RDONLY)
        defer { if fd >= 0 { close(fd) } }
        let file = try DirectoryFile(descriptor: fd, path: path, guarded: true)
        let numbers = probes(c, count: 100)
        let before = batched(file, numbers)
        assertSame(single(file, numbers), before, numbers, "guarded, intact")
        XCTAssertFalse(before.contains { kind($0) == "error" })

        file.markDamaged()
        let after = batched(file, numbers)
        assertSame(single(file, numbers), after, numbers, "guarded, damaged")
        XCTAssertTrue(after.allSatisfy { $0 == .failure(.changedWhileServed(path: path)) })
    }
}

private func kind(_ result: Result<DirectoryEntry?, DirectoryError>) -> String {
    switch result {
    case .failure: return "error"
    case .success(nil): return "none"
    case .success(let entry?):
        if case .exact = entry.match { return "exact" }
        return "prefix"
    }
}
