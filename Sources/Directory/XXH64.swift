/// XXH64 (xxHash, 64-bit variant), the directory file's checksum.
///
/// Chosen over CRC-32 because it runs at memory speed in plain Swift (no
/// hardware CRC instruction is reachable without a C shim) and 64 bits make
/// an accidental match on a corrupted 10^8-entry file negligible. Streaming,
/// so the writer can checksum sections as it produces them.
public struct XXH64: Sendable {
    static let p1: UInt64 = 0x9E37_79B1_85EB_CA87
    static let p2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    static let p3: UInt64 = 0x1656_67B1_9E37_79F9
    static let p4: UInt64 = 0x85EB_CA77_C2B2_AE63
    static let p5: UInt64 = 0x27D4_EB2F_1656_67C5

    private var v1, v2, v3, v4: UInt64
    private let seed: UInt64
    private var totalLength: UInt64 = 0
    private var buffer: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var buffered = 0

    public init(seed: UInt64 = 0) {
        self.seed = seed
        v1 = seed &+ XXH64.p1 &+ XXH64.p2
        v2 = seed &+ XXH64.p2
        v3 = seed
        v4 = seed &- XXH64.p1
    }

    /// One-shot hash of a buffer.
    public static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        var state = XXH64(seed: seed)
        state.update(bytes)
        return state.finalize()
    }

    public static func hash(_ bytes: [UInt8], seed: UInt64 = 0) -> UInt64 {
        bytes.withUnsafeBytes { hash($0, seed: seed) }
    }

    @inline(__always)
    static func round(_ acc: UInt64, _ input: UInt64) -> UInt64 {
        var acc = acc &+ input &* p2
        acc = (acc << 31) | (acc >> 33)
        return acc &* p1
    }

    @inline(__always)
    static func merge(_ acc: UInt64, _ value: UInt64) -> UInt64 {
        let acc = acc ^ round(0, value)
        return acc &* p1 &+ p4
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        totalLength &+= UInt64(bytes.count)
        var offset = 0
        let count = bytes.count
        if buffered > 0 {
            let take = min(32 - buffered, count)
            withUnsafeMutableBytes(of: &buffer) { dst in
                dst.baseAddress!.advanced(by: buffered).copyMemory(from: base, byteCount: take)
            }
            buffered += take
            offset = take
            guard buffered == 32 else { return }
            let (a, b, c, d) = buffer
            stripe(UInt64(littleEndian: a), UInt64(littleEndian: b), UInt64(littleEndian: c), UInt64(littleEndian: d))
            buffered = 0
        }
        var a = v1, b = v2, c = v3, d = v4
        while count - offset >= 32 {
            let p = base.advanced(by: offset)
            a = XXH64.round(a, UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)))
            b = XXH64.round(b, UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
            c = XXH64.round(c, UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 16, as: UInt64.self)))
            d = XXH64.round(d, UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 24, as: UInt64.self)))
            offset += 32
        }
        v1 = a; v2 = b; v3 = c; v4 = d
        if offset < count {
            let rest = count - offset
            withUnsafeMutableBytes(of: &buffer) { dst in
                dst.baseAddress!.copyMemory(from: base.advanced(by: offset), byteCount: rest)
            }
            buffered = rest
        }
    }

    @inline(__always)
    private mutating func stripe(_ a: UInt64, _ b: UInt64, _ c: UInt64, _ d: UInt64) {
        v1 = XXH64.round(v1, a)
        v2 = XXH64.round(v2, b)
        v3 = XXH64.round(v3, c)
        v4 = XXH64.round(v4, d)
    }

    public func finalize() -> UInt64 {
        var h: UInt64
        if totalLength >= 32 {
            h = ((v1 << 1) | (v1 >> 63)) &+ ((v2 << 7) | (v2 >> 57))
                &+ ((v3 << 12) | (v3 >> 52)) &+ ((v4 << 18) | (v4 >> 46))
            h = XXH64.merge(h, v1)
            h = XXH64.merge(h, v2)
            h = XXH64.merge(h, v3)
            h = XXH64.merge(h, v4)
        } else {
            h = seed &+ XXH64.p5
        }
        h &+= totalLength
        var tail = buffer
        let n = buffered
        withUnsafeBytes(of: &tail) { raw in
            var i = 0
            while i + 8 <= n {
                let k = XXH64.round(0, UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
                h ^= k
                h = ((h << 27) | (h >> 37)) &* XXH64.p1 &+ XXH64.p4
                i += 8
            }
            if i + 4 <= n {
                h ^= UInt64(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt32.self))) &* XXH64.p1
                h = ((h << 23) | (h >> 41)) &* XXH64.p2 &+ XXH64.p3
                i += 4
            }
            while i < n {
                h ^= UInt64(raw[i]) &* XXH64.p5
                h = ((h << 11) | (h >> 53)) &* XXH64.p1
                i += 1
            }
        }
        h ^= h >> 33
        h &*= XXH64.p2
        h ^= h >> 29
        h &*= XXH64.p3
        h ^= h >> 32
        return h
    }
}
