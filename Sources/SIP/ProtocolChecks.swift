/// A header field to add to a response. Validated when written: `name` must be a token and
/// `value` must not contain control characters other than HTAB (so no CR/LF injection).
///
/// Threading: a plain value; `Sendable`.
public struct SIPHeaderField: Sendable, Hashable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// A final response the protocol checks (or a malformed request) call for.
///
/// Threading: a plain value; `Sendable` (owns its strings).
public struct SIPRejection: Sendable, Hashable, CustomStringConvertible {
    public var statusCode: Int
    public var reasonPhrase: String
    /// Extra headers the status requires (`Unsupported` for 420, `Allow` for 405/501).
    public var headers: [SIPHeaderField]

    public init(statusCode: Int, reasonPhrase: String, headers: [SIPHeaderField] = []) {
        self.statusCode = statusCode
        self.reasonPhrase = reasonPhrase
        self.headers = headers
    }

    /// The 400 for `.malformed(why, canRespond: true)`.
    public init(malformation: SIPMalformation) {
        self.init(statusCode: 400, reasonPhrase: malformation.reasonPhrase)
    }

    public var description: String { "\(statusCode) \(reasonPhrase)" }
}

/// What the protocol checks accept: one value per role, so that redirect and proxy mode run the
/// same checks in the same order and differ only in these settings.
///
/// Threading: a value type; `Sendable`, share freely.
public struct SIPProtocolPolicy: Sendable, Hashable {
    /// Methods answered normally; a known method outside this set gets 405, an unknown one 501.
    public var allowedMethods: [SIPMethod]
    /// The methods `Allow` lists (with 405, 501 and in an answer to OPTIONS).
    public var advertisedMethods: [SIPMethod]
    /// Option tags accepted in `Require` (case-insensitive); nil leaves `Require` to the
    /// endpoints, as a proxy does (§16.3). The default holds extensions that only constrain
    /// provisional responses (`100rel`) or 2xx answers to INVITE (`timer`), which a redirect
    /// server never sends, so claiming them costs nothing and spares callers a 420.
    public var supportedOptionTags: [String]?
    /// Option tags accepted in `Proxy-Require`; nil does not look at it: lookupd as a UAS (a
    /// redirect server) looks at `Require` only (RFC 3261 §8.2.2.3).
    public var supportedProxyOptionTags: [String]?

    public init(allowedMethods: [SIPMethod] = [.invite, .ack, .cancel, .bye, .options], advertisedMethods: [SIPMethod]? = nil,
                supportedOptionTags: [String]? = ["100rel", "timer"], supportedProxyOptionTags: [String]? = nil) {
        self.allowedMethods = allowedMethods
        self.advertisedMethods = advertisedMethods ?? allowedMethods
        self.supportedOptionTags = supportedOptionTags
        self.supportedProxyOptionTags = supportedProxyOptionTags
    }

    /// A stateless redirect server (lookupd's redirect mode).
    public static let standard = SIPProtocolPolicy()

    /// A stateless proxy (§16.3, lookupd's proxy mode): every known method goes on (no 405),
    /// `Require` is the endpoints' business, and any `Proxy-Require` tag is refused: lookupd
    /// supports no extension that needs a proxy's help.
    public static let proxy = SIPProtocolPolicy(
        allowedMethods: SIPMethod.allCases.filter { $0 != .other },
        advertisedMethods: [.invite, .ack, .cancel, .bye, .options, .prack, .update, .info, .refer, .message, .notify, .subscribe],
        supportedOptionTags: nil, supportedProxyOptionTags: [])

    /// The `Allow` header value these settings produce.
    public var allowHeaderValue: String {
        advertisedMethods.filter { $0 != .other }.map(\.name).joined(separator: ", ")
    }
}

extension SIPRequest {
    /// RFC 3261 §8.2 request validation (§16.3 for a proxy), in this order (first match wins):
    ///
    /// 1. SIP version other than 2.0 → 505 (nothing else can be trusted to mean what we think).
    /// 2. Unknown method → 501; known but not allowed → 405; both with `Allow` (§8.2.1).
    ///    Checked before the CSeq method so that RFC 4475 §3.1.2.18 gets its preferred 501.
    /// 3. CSeq method different from the request method → 400. This holds for ACK and CANCEL
    ///    too: their CSeq method is ACK/CANCEL, only the number is the INVITE's (§17.1.1.3, §9.1).
    /// 4. Request-URI scheme other than sip/sips/tel → 416 (§8.2.2.1).
    /// 5. Max-Forwards 0 → 483 (§16.3 step 3; after 416 as in that section's order).
    /// 6. Require (and, for a proxy, Proxy-Require) with unsupported option tags → 420 with
    ///    `Unsupported` (§8.2.2.3, §16.3 step 5); not for CANCEL (§9.2: the CANCEL does not
    ///    carry the INVITE's extensions).
    ///
    /// ACK is never answered (§17), so for ACK the result is always `nil`. Malformed messages
    /// (duplicate headers, bad CSeq number, bad Content-Length...) never get here: `parse`
    /// reports them as `.malformed`, answered with `SIPRejection(malformation:)`.
    public func protocolRejection(policy: SIPProtocolPolicy = .standard) -> SIPRejection? {
        guard isComplete, method != .ack else { return nil }
        if !isSIP2_0 {
            return SIPRejection(statusCode: 505, reasonPhrase: "Version Not Supported")
        }
        if method == .other {
            return SIPRejection(statusCode: 501, reasonPhrase: "Not Implemented",
                                headers: [SIPHeaderField("Allow", policy.allowHeaderValue)])
        }
        if !policy.allowedMethods.contains(method) {
            return SIPRejection(statusCode: 405, reasonPhrase: "Method Not Allowed",
                                headers: [SIPHeaderField("Allow", policy.allowHeaderValue)])
        }
        if cseqMethod != methodText {
            return SIPRejection(statusCode: 400, reasonPhrase: "CSeq Method Mismatch")
        }
        if requestURI.scheme == .other {
            return SIPRejection(statusCode: 416, reasonPhrase: "Unsupported URI Scheme")
        }
        if maxForwards == 0 {
            return SIPRejection(statusCode: 483, reasonPhrase: "Too Many Hops")
        }
        // Most requests carry neither header: nothing to collect.
        if method != .cancel, !store.requireValues.isEmpty || !store.proxyRequireValues.isEmpty {
            var unsupported: [String] = []
            func collect(_ tags: SIPTokenList, _ supported: [String]?) {
                guard let supported else { return }
                for tag in tags where !supported.contains(where: { tag.equalsIgnoringCase($0) }) {
                    let text = tag.string
                    if !unsupported.contains(text) { unsupported.append(text) }
                }
            }
            collect(requireTags, policy.supportedOptionTags)
            collect(proxyRequireTags, policy.supportedProxyOptionTags)
            if !unsupported.isEmpty {
                return SIPRejection(statusCode: 420, reasonPhrase: "Bad Extension",
                                    headers: [SIPHeaderField("Unsupported", unsupported.joined(separator: ", "))])
            }
        }
        return nil
    }
}
