import TextFormats

// `label-to-caller = no` in proxy mode (issue 17): the PBX gets the relabelled From, the
// caller must get his own From back in every response, and a stateless proxy keeps no call
// state to find it in. So the original From header lines travel with the request, hex-encoded
// in a parameter of lookupd's own Via, which every UAS copies into every response (RFC 3261
// §8.2.6.2) and which lookupd removes before relaying. The parameter carries a SipHash-2-4 tag
// over the branch and the lines under a per-daemon random key: a response whose parameter was
// altered or made up (a forged or buggy upstream) is not relayed, so nothing but the bytes the
// caller himself sent can come back in his From.

/// The key of the tag on a carried From: random per daemon, the same in every worker (a
/// response may come back on a connection another worker holds).
///
/// Threading: a plain value; `Sendable`.
public struct SIPCallerFromKey: Sendable, Hashable {
    let k0: UInt64
    let k1: UInt64

    public init(_ k0: UInt64, _ k1: UInt64) {
        self.k0 = k0
        self.k1 = k1
    }

    public static func random() -> SIPCallerFromKey {
        SIPCallerFromKey(UInt64.random(in: 0...UInt64.max), UInt64.random(in: 0...UInt64.max))
    }
}

/// The Via parameter: 16 hex digits of tag, then the From header lines as hex.
let callerFromParameter: StaticString = "lkd-from"
/// Longer From header lines are not carried (a UDP request must stay small): such a call goes
/// to the PBX with its From untouched and the label in the label header only.
public let maxCarriedFromBytes = 384

/// SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed hash meant as a MAC for short inputs,
/// unlike FNV, whose key falls out of one known input and output.
struct SipHash {
    private var v0, v1, v2, v3: UInt64
    private var tail: UInt64 = 0
    private var length = 0

    init(_ key: SIPCallerFromKey) {
        v0 = key.k0 ^ 0x736f_6d65_7073_6575
        v1 = key.k1 ^ 0x646f_7261_6e64_6f6d
        v2 = key.k0 ^ 0x6c79_6765_6e65_7261
        v3 = key.k1 ^ 0x7465_6462_7974_6573
    }

    private mutating func round() {
        v0 = v0 &+ v1; v1 = (v1 << 13) | (v1 >> 51); v1 ^= v0; v0 = (v0 << 32) | (v0 >> 32)
        v2 = v2 &+ v3; v3 = (v3 << 16) | (v3 >> 48); v3 ^= v2
        v0 = v0 &+ v3; v3 = (v3 << 21) | (v3 >> 43); v3 ^= v0
        v2 = v2 &+ v1; v1 = (v1 << 17) | (v1 >> 47); v1 ^= v2; v2 = (v2 << 32) | (v2 >> 32)
    }

    private mutating func compress(_ m: UInt64) {
        v3 ^= m
        round(); round()
        v0 ^= m
    }

    mutating func add(_ byte: UInt8) {
        tail |= UInt64(byte) << UInt64(8 * (length & 7))
        length += 1
        if length & 7 == 0 {
            compress(tail)
            tail = 0
        }
    }

    mutating func add(_ text: SIPText) { for b in text { add(b) } }

    mutating func finish() -> UInt64 {
        compress(tail | UInt64(truncatingIfNeeded: length) << 56)
        v2 ^= 0xff
        round(); round(); round(); round()
        return v0 ^ v1 ^ v2 ^ v3
    }
}

/// The tag of `lines` carried on the Via with `branch`: bound to the branch, so a parameter
/// copied from another call's Via does not verify.
func callerFromTag(key: SIPCallerFromKey, branch: SIPText, lines: SIPText) -> UInt64 {
    var h = SipHash(key)
    h.add(branch)
    h.add(0)
    h.add(lines)
    return h.finish()
}

extension ByteWriter {
    /// `;lkd-from=<tag><lines in hex>`.
    mutating func appendCallerFrom(_ lines: SIPText, branch: String, key: SIPCallerFromKey) {
        var branch = branch
        let tag = branch.withUTF8 { callerFromTag(key: key, branch: SIPText(baseAddress: $0.baseAddress, count: $0.count), lines: lines) }
        append(";")
        append(callerFromParameter)
        append("=")
        appendHex(tag)
        let digits: StaticString = "0123456789abcdef"
        for b in lines {
            appendByte(digits.utf8Start[Int(b >> 4)])
            appendByte(digits.utf8Start[Int(b & 15)])
        }
    }
}

/// What the `lkd-from` parameter of a response's top Via says.
enum CarriedFrom {
    /// None: the From was not relabelled, the response's own is the caller's.
    case absent
    /// The caller's From header lines, decoded into the arena.
    case lines(SIPText)
    /// Present but not lookupd's (bad hex, wrong tag) or not a From header: not relayed.
    case forged
}

/// Reads and checks the carried From of a response whose top Via `branch` lookupd wrote.
func carriedFrom(_ via: SIPVia, branch: SIPText, key: SIPCallerFromKey, arena: inout Arena) -> CarriedFrom {
    guard let value = via.parameters.value(callerFromParameter) else { return .absent }
    let n = value.count
    guard n > 16, n % 2 == 0, n - 16 <= 2 * maxCarriedFromBytes,
          let out = arena.allocate((n - 16) / 2) else { return .forged }
    var tag: UInt64 = 0
    for i in 0..<16 {
        guard let d = TextInput.hexValue(value[i]) else { return .forged }
        tag = tag << 4 | UInt64(d)
    }
    var i = 16, j = 0
    while i < n {
        guard let hi = TextInput.hexValue(value[i]), let lo = TextInput.hexValue(value[i + 1]) else { return .forged }
        out.storeBytes(of: hi << 4 | lo, toByteOffset: j, as: UInt8.self)
        i += 2
        j += 1
    }
    let lines = SIPText(baseAddress: out, count: j)
    guard callerFromTag(key: key, branch: branch, lines: lines) == tag, isFromHeader(lines) else { return .forged }
    return .lines(lines)
}

/// A From header field as the parser accepted it: `From`/`f`, a colon, no NUL, every CR
/// before an LF and every LF before a folding SP or HT. Only lookupd's own tagged bytes get
/// here; checked anyway, since they are written into a header.
private func isFromHeader(_ lines: SIPText) -> Bool {
    guard let colon = lines.firstIndex(of: ASCII.colon) else { return false }
    var nameEnd = colon
    while nameEnd > 0, isWSP(lines[nameEnd - 1]) { nameEnd -= 1 }
    let name = lines.slice(0, nameEnd)
    guard name.count > 0, name.isToken, HeaderKind(name: name) == .from else { return false }
    for i in 0..<lines.count {
        switch lines[i] {
        case ASCII.nul: return false
        case ASCII.cr: if i + 1 >= lines.count || lines[i + 1] != ASCII.lf { return false }
        case ASCII.lf: if i + 1 >= lines.count || !isWSP(lines[i + 1]) { return false }
        default: break
        }
    }
    return true
}
