import CSIPLexer

/// Headers lookupd's own scanner keeps track of.
enum HeaderKind {
    case via, from, to, callID, cseq, maxForwards, contentLength, contentType
    case require, proxyRequire, privacy, pAssertedIdentity, remotePartyID, pPreferredIdentity, other

    /// As `init(name:)` for a name already known to be a token, which allows a cheaper
    /// comparison: for a token byte `b` and a literal of lowercase letters and '-',
    /// `b | 0x20 == literal` holds exactly when `b` matches ignoring case (the only other byte
    /// that ORs to '-' is CR, which is not a token character).
    init(token name: SIPText) {
        let p = name.baseAddress.unsafelyUnwrapped
        @inline(__always) func equals(_ literal: StaticString) -> Bool {
            let l = literal.utf8Start
            for i in 1..<literal.utf8CodeUnitCount where p.load(fromByteOffset: i, as: UInt8.self) | 0x20 != l[i] { return false }
            return true
        }
        let first = p.load(as: UInt8.self) | 0x20
        switch name.count {
        case 1:
            switch first {
            case UInt8(ascii: "v"): self = .via
            case UInt8(ascii: "f"): self = .from
            case UInt8(ascii: "t"): self = .to
            case UInt8(ascii: "i"): self = .callID
            case UInt8(ascii: "l"): self = .contentLength
            case UInt8(ascii: "c"): self = .contentType
            default: self = .other
            }
        case 2: self = first == UInt8(ascii: "t") && equals("to") ? .to : .other
        case 3: self = first == UInt8(ascii: "v") && equals("via") ? .via : .other
        case 4:
            if first == UInt8(ascii: "f") { self = equals("from") ? .from : .other }
            else if first == UInt8(ascii: "c") { self = equals("cseq") ? .cseq : .other }
            else { self = .other }
        case 7:
            if first == UInt8(ascii: "c") { self = equals("call-id") ? .callID : .other }
            else if first == UInt8(ascii: "p") { self = equals("privacy") ? .privacy : .other }
            else if first == UInt8(ascii: "r") { self = equals("require") ? .require : .other }
            else { self = .other }
        case 12:
            if first == UInt8(ascii: "m") { self = equals("max-forwards") ? .maxForwards : .other }
            else if first == UInt8(ascii: "c") { self = equals("content-type") ? .contentType : .other }
            else { self = .other }
        case 13: self = first == UInt8(ascii: "p") && equals("proxy-require") ? .proxyRequire : .other
        case 14: self = first == UInt8(ascii: "c") && equals("content-length") ? .contentLength : .other
        case 15: self = first == UInt8(ascii: "r") && equals("remote-party-id") ? .remotePartyID : .other
        case 19: self = first == UInt8(ascii: "p") && equals("p-asserted-identity") ? .pAssertedIdentity : .other
        case 20: self = first == UInt8(ascii: "p") && equals("p-preferred-identity") ? .pPreferredIdentity : .other
        default: self = .other
        }
    }

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
        case 15 where name.equalsLiteral("remote-party-id"): self = .remotePartyID
        case 19 where name.equalsLiteral("p-asserted-identity"): self = .pAssertedIdentity
        case 20 where name.equalsLiteral("p-preferred-identity"): self = .pPreferredIdentity
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
///
/// The stored properties opt out of Swift's run-time exclusivity checks
/// (`@exclusivity(unchecked)`): every access to a class property otherwise costs a
/// `swift_beginAccess`/`swift_endAccess` pair with a thread-local lookup, about 30 per request
/// and 7% of the daemon's instructions. That is sound here because a store is only ever used by
/// its parser's thread and no access to one property overlaps another access to it (values are
/// read, then written back; `arena` is passed `inout` to functions that never reach the store).
final class MessageStore {
    enum State { case empty, answerable, request }

    let maxMessageSize: Int
    let toTagKey: UInt64
    /// A copy of the current packet (without leading CR/LF), so views stay valid even if the
    /// caller reuses its receive buffer before writing the response.
    let raw: UnsafeMutableRawPointer
    /// Line positions from the C scanner (`lookupd_sip_lines`), reused per message.
    let lines: UnsafeMutablePointer<lookupd_sip_line>
    static let lineCapacity = 64
    @exclusivity(unchecked) var arena: Arena

    @exclusivity(unchecked) var state = State.empty
    /// The response texts `writeResponse` last found valid. The same configured reason phrase,
    /// label header name and source address text come with response after response, so equal
    /// ones (the same storage, usually: a cheap comparison) are not validated byte by byte again.
    /// Kept across packets: they depend on the texts alone, never on the request.
    @exclusivity(unchecked) var validReasonPhrase: String?
    @exclusivity(unchecked) var validLabelHeaderName: String?
    @exclusivity(unchecked) var validSourceIP: String?
    /// A bare CR or a stray NUL somewhere in the header section: such a packet is never
    /// answered, because copying its headers could put a line break on the wire.
    @exclusivity(unchecked) var hasUnsafeBytes = false
    @exclusivity(unchecked) var leadingBytes = 0

    @exclusivity(unchecked) var methodText = SIPText.empty
    @exclusivity(unchecked) var method = SIPMethod.other
    @exclusivity(unchecked) var requestURIText = SIPText.empty
    @exclusivity(unchecked) var versionText = SIPText.empty

    @exclusivity(unchecked) var viaValues: [SIPText] = []
    @exclusivity(unchecked) var from = SingleHeader()
    @exclusivity(unchecked) var to = SingleHeader()
    @exclusivity(unchecked) var callID = SingleHeader()
    @exclusivity(unchecked) var cseq = SingleHeader()
    @exclusivity(unchecked) var maxForwards = SingleHeader()
    @exclusivity(unchecked) var contentLength = SingleHeader()
    @exclusivity(unchecked) var contentLengthConflict = false
    @exclusivity(unchecked) var contentType = SingleHeader()
    @exclusivity(unchecked) var requireValues: [SIPText] = []
    @exclusivity(unchecked) var proxyRequireValues: [SIPText] = []
    @exclusivity(unchecked) var privacyValues: [SIPText] = []
    @exclusivity(unchecked) var assertedIdentityValues: [SIPText] = []
    @exclusivity(unchecked) var remotePartyIDValues: [SIPText] = []
    @exclusivity(unchecked) var preferredIdentityValues: [SIPText] = []

    // Filled once the packet is known to be a well-formed request.
    @exclusivity(unchecked) var requestURI = SIPURI()
    @exclusivity(unchecked) var fromAddress = SIPNameAddress()
    @exclusivity(unchecked) var toAddress = SIPNameAddress()
    @exclusivity(unchecked) var topVia = SIPVia()
    @exclusivity(unchecked) var cseqNumber: UInt32 = 0
    @exclusivity(unchecked) var cseqMethod = SIPText.empty
    @exclusivity(unchecked) var maxForwardsValue: Int?
    @exclusivity(unchecked) var privacy: SIPPrivacy = []
    @exclusivity(unchecked) var assertedIdentities: [SIPNameAddress] = []
    @exclusivity(unchecked) var remotePartyIDs: [SIPNameAddress] = []
    @exclusivity(unchecked) var preferredIdentities: [SIPNameAddress] = []
    @exclusivity(unchecked) var invalidAssertedIdentityCount = 0
    @exclusivity(unchecked) var bodyStart = 0
    @exclusivity(unchecked) var bodyLength = 0

    static let maxAssertedIdentities = 8

    init(maxMessageSize: Int, toTagKey: UInt64) {
        self.maxMessageSize = maxMessageSize
        self.toTagKey = toTagKey
        // 32 bytes more than a message: the line scanner reads in 32-byte blocks and may look
        // up to 31 bytes past the end (zeroed once, then whatever an earlier message left).
        raw = UnsafeMutableRawPointer.allocate(byteCount: maxMessageSize + 1 + 32, alignment: 16)
        raw.initializeMemory(as: UInt8.self, repeating: 0, count: maxMessageSize + 1 + 32)
        lines = .allocate(capacity: MessageStore.lineCapacity)
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
        lines.deallocate()
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
        // Most of these are empty already: skip the call (it is not free).
        if !viaValues.isEmpty { viaValues.removeAll(keepingCapacity: true) }
        from = SingleHeader()
        to = SingleHeader()
        callID = SingleHeader()
        cseq = SingleHeader()
        maxForwards = SingleHeader()
        contentLength = SingleHeader()
        contentLengthConflict = false
        contentType = SingleHeader()
        if !requireValues.isEmpty { requireValues.removeAll(keepingCapacity: true) }
        if !proxyRequireValues.isEmpty { proxyRequireValues.removeAll(keepingCapacity: true) }
        if !privacyValues.isEmpty { privacyValues.removeAll(keepingCapacity: true) }
        if !assertedIdentityValues.isEmpty { assertedIdentityValues.removeAll(keepingCapacity: true) }
        maxForwardsValue = nil
        privacy = []
        if !assertedIdentities.isEmpty { assertedIdentities.removeAll(keepingCapacity: true) }
        if !remotePartyIDValues.isEmpty { remotePartyIDValues.removeAll(keepingCapacity: true) }
        if !preferredIdentityValues.isEmpty { preferredIdentityValues.removeAll(keepingCapacity: true) }
        if !remotePartyIDs.isEmpty { remotePartyIDs.removeAll(keepingCapacity: true) }
        if !preferredIdentities.isEmpty { preferredIdentities.removeAll(keepingCapacity: true) }
        invalidAssertedIdentityCount = 0
        bodyStart = 0
        bodyLength = 0
    }

    /// The name-addr an identity names: From, or one of the identity headers read.
    /// Inlined, so that a caller using one part of it does not copy the whole value.
    @inline(__always)
    func identityAddress(_ which: SIPIdentityURI) -> SIPNameAddress? {
        func pick(_ list: [SIPNameAddress], _ i: Int) -> SIPNameAddress? { i >= 0 && i < list.count ? list[i] : nil }
        switch which {
        case .from: return fromAddress
        case .assertedIdentity(let i): return pick(assertedIdentities, i)
        case .remotePartyID(let i): return pick(remotePartyIDs, i)
        case .preferredIdentity(let i): return pick(preferredIdentities, i)
        case .uri: return nil
        }
    }
}
