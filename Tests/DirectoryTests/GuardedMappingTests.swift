import Foundation
import Glibc
import XCTest
@testable import Directory

/// A file served straight from disk (guarded) cut in place between a lookup
/// and the copy of its label: the label is reported gone, never handed over
/// as an empty one (the daemon's FileReplacementTests saw a labelled block
/// answered without its label once in CI).
final class GuardedMappingTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUpWithError() throws {
        // The SIGBUS guard's handler and a sanitizer's own do not share the signal.
        try skipUnderSanitizer("SIGBUS handling under a sanitizer's own handler")
        folder = TemporaryFolder("lookupd-guarded")
    }

    override func tearDown() { folder?.cleanup() }

    func testALabelWhosePageVanishedAfterTheLookupIsNotHandedOver() throws {
        // Enough distinct labels that the last one sits pages past the keys and values.
        var c = DirectoryContent()
        let count = 4_000
        c.exactKeys = (0..<count).map { 8613800000000 + UInt64($0) * 7 }
        c.exactValues = (0..<count).map { UInt32($0 + 1) << 1 | 1 }
        c.labels = (0..<count).map { Array("Label number \(String(format: "%05d", $0)) with some length to it".utf8) }
        let path = folder.file("cut.lkd")
        try DirectoryWriter.write(c, to: path, blockShift: 12)
        let fd = open(path, O_RDWR)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        let file = try DirectoryFile(descriptor: fd, path: path, guarded: true)

        let last = try XCTUnwrap(file.lookup(PhoneNumber(value: c.exactKeys[count - 1])!))
        XCTAssertTrue(last.blocked)
        let label = try XCTUnwrap(last.label)
        XCTAssertEqual(file.withIntactLabel(label) { String(decoding: $0, as: UTF8.self) }, "Label number 03999 with some length to it")

        // Cut the file at the page holding that label, as a careless `>` or truncate(1) would.
        let bytes = readBytes(path)
        let text = Array("Label number 03999".utf8)
        let at = try XCTUnwrap((0...(bytes.count - text.count)).last { Array(bytes[$0..<($0 + text.count)]) == text })
        XCTAssertGreaterThan(at & ~4095, Int(file.header.valuesOffset) + 4 * (count + 1), "the label lies past the values")
        XCTAssertEqual(ftruncate(fd, off_t(at & ~4095)), 0)

        let faultsBefore = DirectoryFile.guardedFaults
        var called = false
        XCTAssertNil(file.withIntactLabel(label) { _ in called = true }, "a label read from a vanished page")
        XCTAssertFalse(called)
        XCTAssertGreaterThan(DirectoryFile.guardedFaults, faultsBefore)
        XCTAssertTrue(file.isDamaged)
        // The lenient reader gives an empty label, never zeros passed off as text.
        XCTAssertEqual(file.withLabel(label) { $0.count }, 0)
        // And the lookup itself no longer answers.
        XCTAssertThrowsError(try file.lookup(PhoneNumber(value: c.exactKeys[count - 1])!))
    }
}
