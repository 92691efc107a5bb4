import CPhoneNumbers
import Foundation
import TestSupport
import XCTest
@testable import Directory

/// The numbering cache (docs/FORMAT.md "Numbering cache"): used only when whole, checksummed
/// and keyed by the library loaded now, and then holding exactly what the library says.
final class NumberingCacheTests: XCTestCase {
    static let library = MetadataSnapshot.fromLibrary()
    static let derivedFromLibrary = NumberingData(library, source: .library(cache: nil, note: nil))

    func cacheFile(_ folder: TemporaryFolder) -> String { folder.file("cache/" + NumberingCache.fileName) }

    func testTheFirstProcessWritesTheLibrarysDataAndTheNextReadsIt() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanup() }
        let (first, firstSource) = NumberingCache.load(folder: folder.file("cache"))
        XCTAssertEqual(firstSource, .library(cache: cacheFile(folder), note: "absent"))
        XCTAssertEqual(first, Self.library)
        XCTAssertTrue(Self.library.ok)
        XCTAssertGreaterThan(Self.library.territories.count, 200)
        let (second, secondSource) = NumberingCache.load(folder: folder.file("cache"))
        XCTAssertEqual(secondSource, .cache(cacheFile(folder)))
        XCTAssertEqual(second, Self.library)
        // The tables derived from the library and those of this process (from the user's cache
        // when it is current) judge alike. Both stay reachable (globals): their tables live as
        // long as the process, and LeakSanitizer would report a local one.
        let a = Self.derivedFromLibrary, b = NumberingData.installed
        XCTAssertEqual(a.regions, b.regions)
        XCTAssertEqual(a.fingerprint, b.fingerprint)
        for number: UInt64 in [8613800138000, 12025550143, 442079460000, 390612345678, 80012345678] {
            let n = try XCTUnwrap(PhoneNumber(value: number))
            let (x, y) = (a.judge(n), b.judge(n))
            XCTAssertNotNil(x, "\(number)")
            XCTAssertEqual(x?.ccDigits, y?.ccDigits, "\(number)")
            XCTAssertEqual(x?.answer, y?.answer, "\(number)")
        }
    }

    /// A cache that says something else than the library is used only with the current key:
    /// the proof that a cache is read at all, and that a stale one is not.
    func testTheKeyDecidesAndAStaleCacheIsReplaced() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanup() }
        try FileManager.default.createDirectory(atPath: folder.file("cache"), withIntermediateDirectories: true)
        var altered = Self.library
        altered.fingerprint ^= 1
        altered.territories[0].texts[Int(LOOKUPD_PN_NATIONAL_PREFIX)] = "9"
        let key = try XCTUnwrap(NumberingCache.currentKey(libraryPath: Self.library.libraryPath))
        _ = folder.write("cache/" + NumberingCache.fileName, NumberingCache.encode(altered, key: key))
        XCTAssertEqual(NumberingCache.load(folder: folder.file("cache")).0, altered)

        var oldKey = key
        oldKey[oldKey.count - 20] ^= 0x01  // another file, another modification time ...
        _ = folder.write("cache/" + NumberingCache.fileName, NumberingCache.encode(altered, key: oldKey))
        let (loaded, source) = NumberingCache.load(folder: folder.file("cache"))
        XCTAssertEqual(source, .library(cache: cacheFile(folder), note: "stale"))
        XCTAssertEqual(loaded, Self.library)
        XCTAssertEqual(NumberingCache.load(folder: folder.file("cache")).1, .cache(cacheFile(folder)))
    }

    /// Any flipped byte, a truncation or an extension: the library's data, and a new file.
    func testADamagedCacheIsNeverRead() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanup() }
        let key = try XCTUnwrap(NumberingCache.currentKey(libraryPath: Self.library.libraryPath))
        let good = NumberingCache.encode(Self.library, key: key)
        XCTAssertEqual(try NumberingCache.decode(good).get().1, Self.library)
        var generator = SeededRandom(seed: 16)
        var damaged: [[UInt8]] = [Array(good.dropLast()), good + [0], Array(good.prefix(30)), []]
        for _ in 0..<40 {
            var bytes = good
            bytes[Int.random(in: 0..<bytes.count, using: &generator)] ^= UInt8.random(in: 1...255, using: &generator)
            damaged.append(bytes)
        }
        for bytes in damaged {
            if case .success = NumberingCache.decode(bytes) { XCTFail("damaged cache of \(bytes.count) bytes decoded") }
        }
        try FileManager.default.createDirectory(atPath: folder.file("cache"), withIntermediateDirectories: true)
        _ = folder.write("cache/" + NumberingCache.fileName, damaged[4])
        let (loaded, source) = NumberingCache.load(folder: folder.file("cache"))
        XCTAssertEqual(loaded, Self.library)
        guard case .library(let written?, let note?) = source else { return XCTFail("\(source)") }
        XCTAssertEqual(written, cacheFile(folder))
        XCTAssertTrue(["checksum mismatch", "not a numbering cache", "another format version", "truncated or extended"].contains(note), note)
        XCTAssertEqual(folder.read("cache/" + NumberingCache.fileName), good)
    }

    /// Territories are decoded when first read, but every record's structure is checked when
    /// the file is opened: a bad length in the last territory refuses the whole file, and a
    /// good file gives each territory's record and summary as the library does.
    func testEveryRecordIsCheckedAtOpenAndDecodedAlikeLater() throws {
        let key = try XCTUnwrap(NumberingCache.currentKey(libraryPath: Self.library.libraryPath))
        var altered = Self.library
        let last = altered.territories.count - 1
        altered.territories[last].localOnlyLengths = [Int32](repeating: 5, count: 33)
        guard case .failure(let problem) = NumberingCache.decode(NumberingCache.encode(altered, key: key)) else {
            return XCTFail("a bad length list in the last territory decoded")
        }
        XCTAssertEqual(problem, "malformed")
        let decoded = try NumberingCache.decode(NumberingCache.encode(Self.library, key: key)).get().1
        guard case .cached = decoded.storage else { return XCTFail("decoded eagerly") }
        XCTAssertEqual(decoded.territoryCount, Self.library.territoryCount)
        for t in [last, 0, 17, last / 2] {
            XCTAssertEqual(decoded.record(t), Self.library.record(t))
            XCTAssertEqual(decoded.summary(t), Self.library.summary(t))
        }
    }

    /// The cache this user's processes read (the tests' own `NumberingData.installed`
    /// included) holds the installed library's data.
    func testTheDefaultCacheHoldsTheLibrarysData() {
        XCTAssertEqual(NumberingCache.load(folder: NumberingCache.defaultFolder).0, Self.library)
    }

    /// A folder that cannot be written costs the time only.
    func testAnUnwritableFolderFallsBackToTheLibrary() {
        let (loaded, source) = NumberingCache.load(folder: "/proc/lookupd-no-such-folder")
        XCTAssertEqual(loaded, Self.library)
        guard case .library(nil, let note?) = source else { return XCTFail("\(source)") }
        XCTAssertTrue(note.hasPrefix("absent; not written"), note)
    }
}
