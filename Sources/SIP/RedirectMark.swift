/// The mark lookupd puts in the Contact of its own 3xx answers, so that a request that comes
/// back after one (a phone that follows the 302 to a Request-URI naming lookupd, a UA with
/// lookupd as its outbound proxy) is recognised without remembering calls: `;lookupd=HEX`,
/// a URI parameter a UA keeps when it retargets (RFC 3261 §8.1.3.4, §19.1.5) and any other
/// element ignores.
///
/// HEX is a keyed hash of the Contact's user part with the daemon's random key: only lookupd
/// can make one that it will recognise, so a caller who writes `;lookupd=` into a first INVITE
/// is screened like any other (a forged mark earning a 482 could slip past a PBX's fail-open
/// route). A Request-URI that already carries other marks (another lookupd's, in a cluster)
/// keeps them and gets this one added: whichever node sees the request again knows it.
enum RedirectMark {
    static let name: StaticString = "lookupd"

    /// Written as 16 lower-case hex digits (`ByteWriter.appendHex`, `hex64`).
    static func value(key: UInt64, user: UnsafeRawBufferPointer) -> UInt64 {
        var h = FNV1a(key: key ^ 0x6c6b_7570_3330_3278)
        h.add(SIPText(baseAddress: user.baseAddress, count: user.count))
        return h.finish()
    }

    /// The user part of a configured URI (`sip:USER@host`); empty when it has none.
    static func user(ofURI text: String, _ body: (UnsafeRawBufferPointer) -> Void) {
        var text = text
        text.withUTF8 { all in
            let bytes = UnsafeRawBufferPointer(all)
            guard let colon = bytes.firstIndex(of: ASCII.colon),
                  let at = bytes[(colon + 1)...].firstIndex(of: UInt8(ascii: "@")) else {
                body(UnsafeRawBufferPointer(start: nil, count: 0))
                return
            }
            body(UnsafeRawBufferPointer(rebasing: bytes[(colon + 1)..<at]))
        }
    }
}

extension SIPRequest {
    /// The Request-URI carries the mark of a 3xx this daemon gave for it: the request came back
    /// after lookupd's own redirect, and screening it again would only send it round again.
    public var returnsFromRedirect: Bool {
        guard isComplete else { return false }
        let uri = store.requestURI
        var expected: String?
        for p in uri.parameters where p.name.equalsLiteral(RedirectMark.name) {
            guard let value = p.value, value.count == 16 else { continue }
            if expected == nil { expected = hex64(RedirectMark.value(key: store.toTagKey, user: (uri.rawUser ?? .empty).bytes)) }
            if value.equals(expected!) { return true }
        }
        return false
    }
}
