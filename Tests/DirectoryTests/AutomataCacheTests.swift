import Foundation
import TestSupport
import XCTest
@testable import Directory

/// The automata cache (docs/FORMAT.md "Automata cache"): a calling code's tables read from it
/// are the tables compiled now, and a file that is damaged, of another version, stale or
/// carries an index out of range is never used: the code is compiled instead, and the file
/// written again.
final class AutomataCacheTests: XCTestCase {
    // Globals: the tables of a NumberingData live as long as the process, and LeakSanitizer
    // would report those of a local one.
    static let folder: String = (try? makeTemporaryFolder("lookupd-automata-tests")) ?? "/nonexistent"
    static let library = NumberingCacheTests.library
    static let compiled = NumberingData(library, source: .library(cache: nil, note: nil))
    static let writer = NumberingData(library, source: .library(cache: nil, note: nil), automataFolder: folder)
    static let reader = NumberingData(library, source: .library(cache: nil, note: nil), automataFolder: folder)
    nonisolated(unsafe) static var kept: [CallingCode] = []

    static let countries = ["CN", "IT", "US", "DE", "GB"]

    override class func tearDown() { try? FileManager.default.removeItem(atPath: folder) }

    /// Written forms of numbers of `region`: its example numbers nationally, with the
    /// national prefix, internationally, and each a digit shorter, longer and altered.
    static func inputs(_ data: NumberingData, _ region: String) throws -> [String] {
        let territory = try XCTUnwrap(data.territory(region: region))
        var out: [String] = []
        for d in territory.descriptions {
            guard let e = d.example, !e.isEmpty else { continue }
            for n in [e, String(e.dropLast()), e + "7", "9" + e.dropFirst(), String(e.prefix(3)) + "0" + e.dropFirst(3)] {
                out += [n, (territory.nationalPrefix ?? "") + n, "+\(territory.countryCode)\(n)", "00\(territory.countryCode)\(n)"]
            }
        }
        return out
    }

    func testCachedAutomataAnswerAsCompiledOnes() throws {
        for region in Self.countries {
            let cc = try XCTUnwrap(Self.compiled.territory(region: region)).countryCode
            XCTAssertNotNil(Self.writer.callingCode(cc))
            XCTAssertEqual(Self.writer.automataOrigin(cc), "compiled (cache absent)", region)
            XCTAssertTrue(FileManager.default.fileExists(atPath: Self.folder + "/" + AutomataCache.fileName(cc)))
        }
        for region in Self.countries {
            let cc = try XCTUnwrap(Self.compiled.territory(region: region)).countryCode
            let (a, b) = (try XCTUnwrap(Self.compiled.callingCode(cc)), try XCTUnwrap(Self.reader.callingCode(cc)))
            XCTAssertEqual(Self.reader.automataOrigin(cc), "cache", region)
            XCTAssertEqual(Self.compiled.automataOrigin(cc), "compiled (no automata cache)", region)
            // The tables themselves, entry for entry.
            let stateCount = try XCTUnwrap(Self.compiledCode(cc)).stateCount
            let rowCount = try XCTUnwrap(Self.compiledCode(cc)).rowCount
            XCTAssertGreaterThan(stateCount, 10, region)
            XCTAssertTrue((0..<(stateCount * 10)).allSatisfy { a.next[$0] == b.next[$0] }, region)
            XCTAssertTrue((0..<stateCount).allSatisfy { a.answerRow[$0] == b.answerRow[$0] }, region)
            XCTAssertTrue((0..<(rowCount * AutomataCache.rowLength)).allSatisfy { a.answers[$0] == b.answers[$0] }, region)
            XCTAssertEqual(a.territoryCount, b.territoryCount, region)
            // And what reading numbers answers with them.
            let plainPlan = try NumberingPlan(region: region, data: Self.compiled)
            let cachedPlan = try NumberingPlan(region: region, data: Self.reader)
            let (plain, cached) = (NumberNormalizer(plan: plainPlan), NumberNormalizer(plan: cachedPlan))
            let inputs = try Self.inputs(Self.compiled, region)
            XCTAssertGreaterThan(inputs.count, 40, region)
            var valid = 0
            for input in inputs {
                let answer = plain.normalize(input)
                XCTAssertEqual(cached.normalize(input), answer, "\(region) \(input)")
                if case .number = answer { valid += 1 }
            }
            XCTAssertGreaterThan(valid, 5, region)
        }
    }

    static func compiledCode(_ cc: Int) -> CallingCode? {
        let code = CallingCode(countryCode: cc, territories: compiled.territories(ofCountryCode: cc), all: compiled.territories)
        kept.append(code)
        return code
    }

    /// Every kind of bad file gives the compiled tables and a note, never a crash, and the
    /// file is replaced by a good one.
    func testADamagedStaleOrOtherVersionFileIsCompiledInstead() throws {
        let data = Self.compiled
        let cc = 86
        let members = data.territories(ofCountryCode: cc)
        let build = try XCTUnwrap(AutomataCache.buildIdentity)
        let key = AutomataCache.key(countryCode: cc, members: members, all: data.territories,
                                    fingerprint: data.fingerprint, build: build)
        let code = try XCTUnwrap(Self.compiledCode(cc))
        let good = AutomataCache.encode(code, key: key)
        func resealed(_ bytes: [UInt8]) -> [UInt8] {
            var b = Array(bytes.dropLast(8))
            let sum = XXH64.hash(b)
            for i in 0..<8 { b.append(UInt8(truncatingIfNeeded: sum >> (8 * UInt64(i)))) }
            return b
        }
        func patched(_ offset: Int, _ value: UInt32) -> [UInt8] {
            var b = good
            for i in 0..<4 { b[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(i))) }
            return resealed(b)
        }
        // Offsets: the counts follow the key (4 + key, padded to 4), then the territories.
        let countsAt = AutomataCache.header + 4 + ((key.count + 3) & ~3)
        let nextAt = countsAt + 20 + 4 * members.count
        var flipped = good
        flipped[good.count / 2] ^= 0x10
        var otherKey = key
        otherKey[otherKey.count - 1] ^= 1
        let cases: [(String, [UInt8], String)] = [
            ("a flipped byte", flipped, "checksum mismatch"),
            ("truncated", Array(good.dropLast(100)), "truncated or extended"),
            ("another version", patched(8, AutomataCache.version + 1), "another format version"),
            ("another build or metadata", AutomataCache.encode(code, key: otherKey), "stale"),
            ("a transition past the states", patched(nextAt, UInt32(code.stateCount)), "index out of range"),
            ("more states than the file holds", patched(countsAt, 1 << 20), "malformed"),
            ("not a cache", Array("hello".utf8), "not an automata cache"),
        ]
        XCTAssertEqual(try AutomataCache.decode(good, countryCode: cc, members: members, key: key).get().stateCount,
                       code.stateCount)
        for (what, bytes, problem) in cases {
            let folder = TemporaryFolder()
            defer { folder.cleanup() }
            XCTAssertThrowsError(try AutomataCache.decode(bytes, countryCode: cc, members: members, key: key).get(), what) {
                XCTAssertEqual(($0 as? NumberingCache.DecodeProblem)?.description, problem, what)
            }
            _ = folder.write(AutomataCache.fileName(cc), bytes)
            let (loaded, origin) = AutomataCache.load(folder: folder.path, countryCode: cc, members: members,
                                                      all: data.territories, fingerprint: data.fingerprint)
            Self.kept.append(loaded)
            XCTAssertEqual(origin, "compiled (cache \(problem))", what)
            XCTAssertEqual(loaded.stateCount, code.stateCount, what)
            XCTAssertTrue((0..<(code.stateCount * 10)).allSatisfy { loaded.tables.next[$0] == code.tables.next[$0] }, what)
            XCTAssertEqual(folder.read(AutomataCache.fileName(cc)), good, what)
            let (again, againOrigin) = AutomataCache.load(folder: folder.path, countryCode: cc, members: members,
                                                          all: data.territories, fingerprint: data.fingerprint)
            Self.kept.append(again)
            XCTAssertEqual(againOrigin, "cache", what)
        }
    }

    /// `lookupd serve` reads the cache but never writes it (a worker would fsync mid-call):
    /// with writes off, a missing file is compiled in memory and not created.
    func testAReadOnlyProcessCompilesWithoutWriting() throws {
        let data = Self.compiled
        let cc = 39
        let folder = TemporaryFolder()
        defer { folder.cleanup() }
        NumberingData.readAutomataCacheOnly()
        defer { AutomataCache.writes.store(true, ordering: .relaxed) }
        let (loaded, origin) = AutomataCache.load(folder: folder.path, countryCode: cc, members: data.territories(ofCountryCode: cc),
                                                  all: data.territories, fingerprint: data.fingerprint)
        Self.kept.append(loaded)
        XCTAssertEqual(origin, "compiled (cache absent; read-only in this process)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder.file(AutomataCache.fileName(cc))))
        XCTAssertEqual(loaded.stateCount, try XCTUnwrap(Self.compiledCode(cc)).stateCount)
    }
}
