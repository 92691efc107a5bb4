import Identity
import TextFormats

// The caller identity, extracted once (issue 14, docs/SIP.md "Who is calling"): the daemon
// takes it from the request (`SIPRequest.callerIdentity`), `lookupd query` from its argument
// through the same reader (`SIPIdentityReader`), so both read the same bytes the same way.

extension SIPURI {
    /// The identity this URI carries, with `displayName` from its header value.
    ///
    /// A sip:/sips: user part is split at its first `;` before it is %-decoded (RFC 3261
    /// §19.1.2: an escaped `%3B` is part of the user, not a separator), then decoded once;
    /// its parameters (RFC 3966 `phone-context`, 3GPP's `verstat` for `user=phone`) are read
    /// from the rest. A tel: number is decoded likewise, its parameters read from the URI's.
    func callerIdentity(displayName: SIPText?, arena: inout Arena) -> CallerIdentity {
        var identity = CallerIdentity(scheme: .other, number: nil, displayName: displayName?.bytes)
        switch scheme {
        case .sip: identity.scheme = .sip
        case .sips: identity.scheme = .sips
        case .tel: identity.scheme = .tel
        case .other: return identity
        }
        let uriParameters = IdentityParameters(parameters)
        identity.userIsPhone = uriParameters.user.map { $0.equalsLiteral("phone") } ?? false
        if let verstat = uriParameters.verstat { identity.verstat = verstat.bytes }
        guard let raw = rawUser else { return identity }
        var numberEnd = raw.count
        if scheme != .tel, let semicolon = raw.firstIndex(of: ASCII.semicolon) { numberEnd = semicolon }
        let number = raw.slice(0, numberEnd)
        identity.malformedEscape = hasMalformedEscape(number)
        identity.number = arena.percentDecoded(number).bytes
        // Parameters: after the number inside a sip: user part, the URI's own for tel:.
        let userParameters = scheme == .tel ? uriParameters : IdentityParameters(SIPParameters(raw.slice(numberEnd, raw.count)))
        if let context = userParameters.phoneContext ?? uriParameters.phoneContext {
            identity.phoneContext = arena.percentDecoded(context).bytes
        }
        if identity.verstat == nil, let verstat = userParameters.verstat { identity.verstat = verstat.bytes }
        return identity
    }

    /// The first `user`, `verstat` and `phone-context` of a parameter list, found in one walk
    /// (each `value(_:)` walks the list again, and this runs for every INVITE).
    private struct IdentityParameters {
        var user: SIPText?
        var verstat: SIPText?
        var phoneContext: SIPText?

        init(_ parameters: SIPParameters) {
            for p in parameters {
                if user == nil, p.name.equalsLiteral("user") {
                    user = p.value ?? .empty
                } else if verstat == nil, p.name.equalsLiteral("verstat") {
                    verstat = p.value ?? .empty
                } else if phoneContext == nil, p.name.equalsLiteral("phone-context") {
                    phoneContext = p.value ?? .empty
                }
            }
        }
    }

    private func hasMalformedEscape(_ text: SIPText) -> Bool {
        var i = 0
        while i < text.count {
            if text[i] == ASCII.percent {
                guard i + 2 < text.count, TextInput.hexValue(text[i + 1]) != nil, TextInput.hexValue(text[i + 2]) != nil else { return true }
                i += 3
            } else {
                i += 1
            }
        }
        return false
    }
}

extension SIPRequest {
    /// The caller identity of an initial INVITE: the From URI or one of the asserted
    /// identities. Valid until the parser's next `parse`.
    public func callerIdentity(_ which: SIPIdentityURI) -> CallerIdentity {
        let address = (isComplete ? store.identityAddress(which) : nil) ?? from
        return address.uri.callerIdentity(displayName: address.displayName, arena: &store.arena)
    }
}

/// Reads a caller identity from text the way the daemon reads a From header value:
/// `"Alice" <sip:+8613800138000@pbx>`, `<tel:+1-202-555-0143>`, or a bare URI (taken whole,
/// parameters included: `sip:+8613800138000@pbx;user=phone`); anything that is not a URI is
/// a bare number (`+86 138 0013 8000`, `013800138000`).
///
/// Threading: one reader per thread; not `Sendable`. The identity is valid only inside `body`.
public final class SIPIdentityReader {
    private var arena: Arena

    public init(capacity: Int = 16384) {
        arena = Arena(capacity: capacity)
    }

    deinit { arena.deallocate() }

    public func withIdentity<R>(_ text: UnsafeRawBufferPointer, _ body: (CallerIdentity) throws -> R) rethrows -> R {
        arena.reset()
        let value = SIPText(baseAddress: text.baseAddress, count: text.count).trimmingLWS()
        if let first = value.first, first == ASCII.quote || value.firstIndex(of: ASCII.lessThan) != nil {
            if let address = SIPNameAddress.read(value, arena: &arena) {
                return try body(address.uri.callerIdentity(displayName: address.displayName, arena: &arena))
            }
        } else if hasScheme(value), let uri = SIPURI.read(value, arena: &arena) {
            return try body(uri.callerIdentity(displayName: nil, arena: &arena))
        }
        return try body(.bare(value.bytes))
    }

    public func withIdentity<R>(_ text: String, _ body: (CallerIdentity) throws -> R) rethrows -> R {
        var text = text
        return try text.withUTF8 { try withIdentity(UnsafeRawBufferPointer($0), body) }
    }

    /// `scheme:` (RFC 3986 §3.1): a number never starts so.
    private func hasScheme(_ text: SIPText) -> Bool {
        guard let first = text.first, isAlpha(first), let colon = text.firstIndex(of: ASCII.colon) else { return false }
        for i in 0..<colon {
            let b = text[i]
            guard isAlpha(b) || isDigit(b) || b == 0x2B || b == 0x2D || b == 0x2E else { return false }
        }
        return true
    }
}
