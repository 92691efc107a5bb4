/// The parser's current request, read in place.
///
/// Threading and lifetime: a view of its `SIPParser`'s state; valid until that parser's next
/// `parse`, on the parser's thread only. Not `Sendable`.
public struct SIPRequest {
    let store: MessageStore

    init(store: MessageStore) { self.store = store }

    /// True after `.request`: every accessor is meaningful. Otherwise parsed values read as
    /// empty/nil; only the raw method text, Call-ID and Via count may still be informative.
    public var isComplete: Bool { store.state == .request }
    /// True after `.request` or `.malformed(_, canRespond: true)`: a response can be written.
    public var canRespond: Bool { store.state != .empty }

    public var method: SIPMethod { store.method }
    public var methodText: SIPText { store.methodText }
    /// As written on the request line, e.g. `SIP/2.0`.
    public var sipVersion: SIPText { store.versionText }
    public var isSIP2_0: Bool { store.versionText.equalsLiteral("SIP/2.0") }
    public var requestURI: SIPURI { isComplete ? store.requestURI : SIPURI() }

    public var from: SIPNameAddress { isComplete ? store.fromAddress : SIPNameAddress() }
    public var to: SIPNameAddress { isComplete ? store.toAddress : SIPNameAddress() }
    public var toHasTag: Bool { isComplete && store.toAddress.tag != nil }

    /// Valid P-Asserted-Identity values in order, across all PAI header fields and comma-separated
    /// values (RFC 3325 allows one sip:/sips: plus one tel:). At most 8 are kept.
    public var assertedIdentities: SIPAssertedIdentities { SIPAssertedIdentities(store: store) }
    /// Valid Remote-Party-ID values in order (at most 8), every party.
    public var remotePartyIDs: [SIPNameAddress] { isComplete ? store.remotePartyIDs : [] }
    /// Valid P-Preferred-Identity values in order (at most 8).
    public var preferredIdentities: [SIPNameAddress] { isComplete ? store.preferredIdentities : [] }

    /// The first Remote-Party-ID of the calling party: `party=calling`, or no `party` (the
    /// draft's default); `party=called` names the callee.
    public var callingPartyIDIndex: Int? {
        guard isComplete else { return nil }
        return store.remotePartyIDs.firstIndex { $0.parameters.value("party").map { $0.equalsIgnoringCase("calling") } ?? true }
    }

    /// The calling party's Remote-Party-ID asks that its number be withheld (`privacy=full` or
    /// `privacy=uri`): treated as `Privacy: id`. `privacy=name` hides the name only.
    public var remotePartyIDWithheld: Bool {
        guard let i = callingPartyIDIndex else { return false }
        for p in store.remotePartyIDs[i].parameters where p.name.equalsIgnoringCase("privacy") {
            if let v = p.value, v.equalsIgnoringCase("full") || v.equalsIgnoringCase("uri") { return true }
        }
        return false
    }

    /// PAI values that were present but unparsable (ignored rather than fatal).
    public var invalidAssertedIdentityCount: Int { store.invalidAssertedIdentityCount }

    /// The first asserted identity with the given scheme.
    public func assertedIdentity(scheme: SIPURIScheme) -> SIPNameAddress? {
        for identity in store.assertedIdentities where identity.uri.scheme == scheme { return identity }
        return nil
    }

    public var privacy: SIPPrivacy { store.privacy }
    /// Every Privacy token, as written (`id`, `header`, `none`, ...).
    public var privacyTokens: SIPTokenList { SIPTokenList(values: store.privacyValues, separators: (ASCII.semicolon, ASCII.comma)) }

    /// The Call-ID as written (unfolded, trimmed).
    public var callID: SIPText { store.callID.value ?? .empty }
    public var cseqNumber: UInt32 { isComplete ? store.cseqNumber : 0 }
    public var cseqMethod: SIPText { isComplete ? store.cseqMethod : .empty }
    /// `nil` when absent (RFC 2543 requests may omit it).
    public var maxForwards: Int? { store.maxForwardsValue }

    public var topVia: SIPVia { isComplete ? store.topVia : SIPVia() }
    /// The number of Via values, counting comma-separated ones.
    public var viaCount: Int { store.viaValues.count }

    public var requireTags: SIPTokenList { SIPTokenList(values: store.requireValues, separators: (ASCII.comma, ASCII.comma)) }
    public var proxyRequireTags: SIPTokenList { SIPTokenList(values: store.proxyRequireValues, separators: (ASCII.comma, ASCII.comma)) }

    public var contentType: SIPText? { store.contentType.value }

    /// Where the body is in the bytes given to `parse` (Content-Length bytes after the empty line,
    /// or the rest of the datagram without Content-Length). lookupd never parses bodies; this
    /// lets a caller forward them untouched.
    public var bodyRange: Range<Int> {
        let start = store.leadingBytes + store.bodyStart
        return start..<(start + store.bodyLength)
    }
}

/// The asserted identities of the current request, as a collection.
///
/// Threading and lifetime: as `SIPRequest`.
public struct SIPAssertedIdentities: RandomAccessCollection {
    let store: MessageStore
    public var startIndex: Int { 0 }
    public var endIndex: Int { store.assertedIdentities.count }
    public subscript(position: Int) -> SIPNameAddress { store.assertedIdentities[position] }
}

/// Tokens of list-valued headers (Require, Proxy-Require, Privacy) across all their header
/// fields, split lazily.
///
/// Threading and lifetime: as `SIPText`.
public struct SIPTokenList: Sequence {
    let values: [SIPText]
    let separators: (UInt8, UInt8)

    public struct Iterator: IteratorProtocol {
        let values: [SIPText]
        let separators: (UInt8, UInt8)
        var valueIndex = 0
        var position = 0

        public mutating func next() -> SIPText? {
            while valueIndex < values.count {
                let value = values[valueIndex]
                while position <= value.count {
                    var end = value.count
                    var i = position
                    while i < value.count {
                        if value[i] == separators.0 || value[i] == separators.1 { end = i; break }
                        i += 1
                    }
                    let item = value.slice(position, end).trimmingLWS()
                    position = end + 1
                    if item.count > 0 { return item }
                }
                valueIndex += 1
                position = 0
            }
            return nil
        }
    }

    public func makeIterator() -> Iterator { Iterator(values: values, separators: separators) }

    /// Case-insensitive membership (tokens are case-insensitive, RFC 3261 §7.3.1).
    public func contains(token: String) -> Bool {
        contains { $0.equalsIgnoringCase(token) }
    }
}
