import XCTest
@testable import Directory

/// XXH64 against reference values (xxHash's own `xxh64`, checked with the
/// Python `xxhash` 4.1.0 binding; the "", "a" and "abc" values are also the
/// published test vectors).
final class XXH64Tests: XCTestCase {
    /// 0, 1, 2, ... (wrapping at 256).
    func ramp(_ n: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: $0) } }

    func testKnownVectors() {
        XCTAssertEqual(XXH64.hash([UInt8]()), 0xEF46_DB37_51D8_E999)
        XCTAssertEqual(XXH64.hash(Array("a".utf8)), 0xD24E_C4F1_A98C_6E5B)
        XCTAssertEqual(XXH64.hash(Array("abc".utf8)), 0x44BC_2CF5_AD77_0999)
        XCTAssertEqual(XXH64.hash(Array("Nobody inspects the spammish repetition".utf8)), 0xFBCE_A83C_8A37_8BF1)
        XCTAssertEqual(XXH64.hash(ramp(100)), 0x6AC1_E580_3216_6597)
        XCTAssertEqual(XXH64.hash((0..<1000).map { UInt8(($0 * 7 + 3) % 256) }), 0x5F23_5FA0_33F1_A3FB)
    }

    /// Lengths around the 32-byte stripe and the 8/4/1-byte tails.
    func testStripeBoundaries() {
        let expected: [Int: UInt64] = [
            31: 0xC346_D2B5_9B4D_8EE1, 32: 0xCBF5_9C51_16FF_32B4, 33: 0x0C53_5D1A_CAFB_8EAD,
            63: 0xE26A_A9E2_A95F_8E4F, 64: 0xF7C6_7301_DB67_13F0, 65: 0xC31E_B63B_2AE4_465B,
        ]
        for (n, value) in expected {
            XCTAssertEqual(XXH64.hash(ramp(n)), value, "length \(n)")
        }
    }

    func testSeed() {
        XCTAssertEqual(XXH64.hash(Array("abc".utf8), seed: 1), 0xBEA9_CA81_9932_8908)
        XCTAssertEqual(XXH64.hash(ramp(100), seed: 0x9E37_79B9_7F4A_7C15), 0x3B97_D91E_BA03_E785)
        XCTAssertNotEqual(XXH64.hash(ramp(100), seed: 1), XXH64.hash(ramp(100)))
    }

    func testStreamingInOddChunksEqualsOneShot() {
        var rng = SeededRandom(seed: 7)
        for length in [0, 1, 3, 31, 32, 33, 100, 1000, 4099] {
            let data = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let oneShot = XXH64.hash(data)
            for chunkSizes in [[1], [3], [7], [13], [31], [33], [1, 2, 5, 64, 11], [100]] {
                var state = XXH64()
                var offset = 0
                var turn = 0
                data.withUnsafeBytes { raw in
                    while offset < length {
                        let size = min(chunkSizes[turn % chunkSizes.count], length - offset)
                        state.update(UnsafeRawBufferPointer(rebasing: raw[offset..<offset + size]))
                        // Empty updates change nothing.
                        state.update(UnsafeRawBufferPointer(rebasing: raw[offset..<offset]))
                        offset += size
                        turn += 1
                    }
                }
                XCTAssertEqual(state.finalize(), oneShot, "length \(length) chunks \(chunkSizes)")
            }
        }
        // The 100-byte reference vector, streamed 7 bytes at a time.
        var state = XXH64()
        let data = ramp(100)
        data.withUnsafeBytes { raw in
            for start in stride(from: 0, to: 100, by: 7) {
                state.update(UnsafeRawBufferPointer(rebasing: raw[start..<min(start + 7, 100)]))
            }
        }
        XCTAssertEqual(state.finalize(), 0x6AC1_E580_3216_6597)
    }

    func testFinalizeDoesNotConsumeTheState() {
        var state = XXH64()
        Array("ab".utf8).withUnsafeBytes { state.update($0) }
        let first = state.finalize()
        XCTAssertEqual(first, state.finalize())
        Array("c".utf8).withUnsafeBytes { state.update($0) }
        XCTAssertEqual(state.finalize(), 0x44BC_2CF5_AD77_0999)
    }
}
