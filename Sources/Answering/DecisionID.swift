import Directory
import SIP
import TextRules

/// The id of one decision (issue 17): what a blocked caller quotes when asking for redress
/// and what the operator searches the decision log for. 32 hex digits, within
/// `RedressRules.isDecisionID`.
///
/// Derived from what makes a request this transaction — Call-ID, From tag, CSeq, the top
/// Via's branch — and from where it came, never from a counter or the clock: a
/// retransmission of the same INVITE gets the same id (the log shows one decision, not
/// several), and no state is kept to make it. 128 bits, so that two calls share an id only
/// if they share all of these (a carrier's year of calls gives no accidental match).
///
/// Threading: a namespace.
enum DecisionID {
    static func make(_ request: SIPRequest, source: SIPSourceAddress) -> String {
        let (high, low) = words(request, source: source)
        return hex(high, low)
    }

    /// The id's two words, high first. The fields, each after its length, are laid out in one
    /// buffer and hashed in one pass per seed: the same hashes as feeding them one by one
    /// (XXH64 of a concatenation), without two streaming states buffering a dozen small pieces.
    static func words(_ request: SIPRequest, source: SIPSourceAddress) -> (UInt64, UInt64) {
        let callID = request.callID.bytes
        let fromTag = request.from.tag?.bytes ?? UnsafeRawBufferPointer(start: nil, count: 0)
        let branch = request.topVia.branch?.bytes ?? UnsafeRawBufferPointer(start: nil, count: 0)
        var ip = source.ip
        return ip.withUTF8 { ipBytes in
            let capacity = 6 * 4 + callID.count + fromTag.count + 4 + branch.count + ipBytes.count + 2
            return withUnsafeTemporaryAllocation(byteCount: capacity, alignment: 8) { buffer in
                // Written with an offset passed along, not a nested function capturing it: a
                // captured variable got a run-time exclusivity check on every use.
                var at = 0
                put(callID, into: buffer, at: &at)
                put(fromTag, into: buffer, at: &at)
                put(request.cseqNumber, into: buffer, at: &at)
                put(branch, into: buffer, at: &at)
                put(UnsafeRawBufferPointer(ipBytes), into: buffer, at: &at)
                put(source.port, into: buffer, at: &at)
                let fields = UnsafeRawBufferPointer(start: buffer.baseAddress, count: at)
                return (XXH64.hash(fields, seed: 0x7265_6472_6573_7331), XXH64.hash(fields, seed: 0x6c6f_6f6b_7570_6431))
            }
        }
    }

    /// One field: its length first, so that no two field lists hash as one, then its bytes.
    @inline(__always)
    private static func put(_ bytes: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer, at: inout Int) {
        buffer.storeBytes(of: UInt32(truncatingIfNeeded: bytes.count).littleEndian, toByteOffset: at, as: UInt32.self)
        at += 4
        if let base = bytes.baseAddress, bytes.count > 0 {
            (buffer.baseAddress! + at).copyMemory(from: base, byteCount: bytes.count)
            at += bytes.count
        }
    }

    /// A fixed-width integer field, little-endian, after its length.
    @inline(__always)
    private static func put<T: FixedWidthInteger>(_ value: T, into buffer: UnsafeMutableRawBufferPointer, at: inout Int) {
        buffer.storeBytes(of: UInt32(MemoryLayout<T>.size).littleEndian, toByteOffset: at, as: UInt32.self)
        buffer.storeBytes(of: value.littleEndian, toByteOffset: at + 4, as: T.self)
        at += 4 + MemoryLayout<T>.size
    }

    /// The id of the `sequence`th lookup of a daemon whose start drew `nonce`: an HTTP lookup
    /// has no transaction to derive one from, and is never retransmitted.
    static func make(sequence: UInt64, nonce: UInt64) -> String {
        var low = XXH64(seed: nonce)
        var high = XXH64(seed: nonce ^ 0x6874_7470_6c6f_6f6b)
        var n = sequence.littleEndian
        withUnsafeBytes(of: &n) { low.update($0); high.update($0) }
        return hex(high.finalize(), low.finalize())
    }

    /// 32 lowercase hex digits, high word first, written in place: every logged call makes
    /// one, and building it from `String(radix:)` pieces cost more than both hashes.
    static func hex(_ high: UInt64, _ low: UInt64) -> String {
        String(unsafeUninitializedCapacity: 32) { out in
            let digits: StaticString = "0123456789abcdef"
            let table = digits.utf8Start
            for i in 0..<16 {
                out[i] = table[Int((high >> UInt64(60 - 4 * i)) & 0xF)]
                out[16 + i] = table[Int((low >> UInt64(60 - 4 * i)) & 0xF)]
            }
            return 32
        }
    }
}

/// Decision ids for the lookups of one HTTP listener (`/lookup`, `/lookup.json`): unique for
/// the daemon's lifetime (a random draw at start, then a count), 32 hex digits as for calls.
///
/// Threading: belongs to one thread.
public struct LookupDecisionIDs {
    private let nonce = UInt64.random(in: .min ... .max)
    private var count: UInt64 = 0

    public init() {}

    public mutating func next() -> String {
        count &+= 1
        return DecisionID.make(sequence: count, nonce: nonce)
    }
}
