/// Headers lookupd's own scanner keeps track of.
enum HeaderKind {
    case via, from, to, callID, cseq, maxForwards, contentLength, contentType
    case require, proxyRequire, privacy, pAssertedIdentity, other

    /// Long and compact names (RFC 3261 §7.3.3), case-insensitive.
    init(name: SIPText) {
        switch name.count {
        case 1:
            switch lowerASCII(name[0]) {
            case UInt8(ascii: "v"): self = .via
            case UInt8(ascii: "f"): self = .from
            case UInt8(ascii: "t"): self = .to
            case UInt8(ascii: "i"): self = .callID
            case UInt8(ascii: "l"): self = .contentLength
            case UInt8(ascii: "c"): self = .contentType
            default: self = .other
            }
        case 2 where name.equalsLiteral("to"): self = .to
        case 3 where name.equalsLiteral("via"): self = .via
        case 4 where name.equalsLiteral("from"): self = .from
        case 4 where name.equalsLiteral("cseq"): self = .cseq
        case 7 where name.equalsLiteral("call-id"): self = .callID
        case 7 where name.equalsLiteral("privacy"): self = .privacy
        case 7 where name.equalsLiteral("require"): self = .require
        case 12 where name.equalsLiteral("max-forwards"): self = .maxForwards
        case 12 where name.equalsLiteral("content-type"): self = .contentType
        case 13 where name.equalsLiteral("proxy-require"): self = .proxyRequire
        case 14 where name.equalsLiteral("content-length"): self = .contentLength
        case 19 where name.equalsLiteral("p-asserted-identity"): self = .pAssertedIdentity
        default: self = .other
        }
    }
}

/// A header that must appear at most once: its first value and how often it appeared.
struct SingleHeader {
    var value: SIPText?
    var count = 0

    mutating func record(_ v: SIPText) {
        if count == 0 { value = v }
        count += 1
    }

    /// Present with a non-empty value (osip silently ignores `From:` with nothing after it).
    var isUsable: Bool { (value?.count ?? 0) > 0 }
}

/// Everything the parser knows about the current packet. Reused from packet to packet: the
/// buffers are allocated once, the arrays keep their capacity.
///
/// Threading: owned by one `SIPParser`; never shared.
final class MessageStore {
    enum State { case empty, answerable, request }

    let maxMessageSize: Int
    let toTagKey: UInt64
    /// A copy of the current packet (without leading CR/LF), so views stay valid even if the
    /// caller reuses its receive buffer before writing the response.
    let raw: UnsafeMutableRawPointer
    var arena: Arena

    var state = State.empty
    /// A bare CR or a stray NUL somewhere in the header section: such a packet is never
    /// answered, because copying its headers could put a line break on the wire.
    var hasUnsafeBytes = false
    var leadingBytes = 0

    var methodText = SIPText.empty
    var method = SIPMethod.other
    var requestURIText = SIPText.empty
    var versionText = SIPText.empty

    var viaValues: [SIPText] = []
    var from = SingleHeader()
    var to = SingleHeader()
    var callID = SingleHeader()
    var cseq = SingleHeader()
    var maxForwards = SingleHeader()
    var contentLength = SingleHeader()
    var contentLengthConflict = false
    var contentType = SingleHeader()
    var requireValues: [SIPText] = []
    var proxyRequireValues: [SIPText] = []
    var privacyValues: [SIPText] = []
    var assertedIdentityValues: [SIPText] = []

    // Filled once the packet is known to be a well-formed request.
    var requestURI = SIPURI()
    var fromAddress = SIPNameAddress()
    var toAddress = SIPNameAddress()
    var topVia = SIPVia()
    var cseqNumber: UInt32 = 0
    var cseqMethod = SIPText.empty
    var maxForwardsValue: Int?
    var privacy: SIPPrivacy = []
    var assertedIdentities: [SIPNameAddress] = []
    var invalidAssertedIdentityCount = 0
    var bodyStart = 0
    var bodyLength = 0

    static let maxAssertedIdentities = 8

    init(maxMessageSize: Int, toTagKey: UInt64) {
        self.maxMessageSize = maxMessageSize
        self.toTagKey = toTagKey
        raw = UnsafeMutableRawPointer.allocate(byteCount: maxMessageSize + 1, alignment: 16)
        // Derived text never exceeds a few times the header section: unfolded values, decoded
        // user parts, unquoted names and C-string copies each shrink or keep their source size.
        arena = Arena(capacity: 4 * maxMessageSize + 4096)
        viaValues.reserveCapacity(16)
        requireValues.reserveCapacity(4)
        proxyRequireValues.reserveCapacity(4)
        privacyValues.reserveCapacity(4)
        assertedIdentityValues.reserveCapacity(4)
        assertedIdentities.reserveCapacity(MessageStore.maxAssertedIdentities)
    }

    deinit {
        raw.deallocate()
        arena.deallocate()
    }

    /// Clears what the next parse reads before writing. Values only meaningful after a complete
    /// parse (URI, addresses, Via, CSeq...) are not cleared: `SIPRequest` hides them unless
    /// `state == .request`, and a successful parse overwrites them all.
    func reset() {
        state = .empty
        hasUnsafeBytes = false
        arena.reset()
        leadingBytes = 0
        methodText = .empty
        method = .other
        requestURIText = .empty
        versionText = .empty
        viaValues.removeAll(keepingCapacity: true)
        from = SingleHeader()
        to = SingleHeader()
        callID = SingleHeader()
        cseq = SingleHeader()
        maxForwards = SingleHeader()
        contentLength = SingleHeader()
        contentLengthConflict = false
        contentType = SingleHeader()
        requireValues.removeAll(keepingCapacity: true)
        proxyRequireValues.removeAll(keepingCapacity: true)
        privacyValues.removeAll(keepingCapacity: true)
        assertedIdentityValues.removeAll(keepingCapacity: true)
        maxForwardsValue = nil
        privacy = []
        assertedIdentities.removeAll(keepingCapacity: true)
        invalidAssertedIdentityCount = 0
        bodyStart = 0
        bodyLength = 0
    }
}
