/// Who a call claims to be from, as the SIP layer extracted it once from a From or
/// P-Asserted-Identity value (or `lookupd query` from its argument, through the same SIP
/// reader): the URI scheme, the number-bearing text already %-decoded (once, per RFC 3261
/// §19.1.2), the parameters screening reads, and the display name.
///
/// Screening reads `number` and `phoneContext` as a telephone number and never parses or
/// decodes a URI itself, so the daemon and `lookupd query` give the same answer for the
/// same bytes.
///
/// Threading and lifetime: a view of bytes owned by whoever built it (a SIP parser's current
/// request, or the text `lookupd query` was given); valid while those are. Not `Sendable`.
public struct CallerIdentity {
    public enum Scheme: Sendable, Equatable {
        /// Not a URI: a bare number as written (`+86 138 0013 8000`, a `lookupd query` argument).
        case none
        case sip, sips, tel
        /// Some other URI scheme (`mailto:`, `urn:`): it carries no telephone number.
        case other
    }

    public var scheme: Scheme
    /// The user part of a `sip:`/`sips:` URI or the number of a `tel:` URI, up to its first
    /// unescaped `;`, %-decoded; a bare text as given. nil when there is none: a URI without
    /// a user part (`sip:anonymous.invalid`) or of another scheme.
    public var number: UnsafeRawBufferPointer?
    /// The `phone-context` parameter (RFC 3966 §5.1.5), decoded: `+86-10` or a domain name.
    public var phoneContext: UnsafeRawBufferPointer?
    /// The user part holds a `%` not followed by two hex digits.
    public var malformedEscape: Bool
    /// `user=phone` (RFC 3261 §19.1.1): the user part is a telephone number.
    public var userIsPhone: Bool
    /// `verstat` (a URI parameter, or inside the user part as 3GPP TS 24.229 writes it for
    /// `user=phone`), as written.
    public var verstat: UnsafeRawBufferPointer?
    /// The display name, unquoted; nil when there is none.
    public var displayName: UnsafeRawBufferPointer?

    public init(scheme: Scheme = .none, number: UnsafeRawBufferPointer?, phoneContext: UnsafeRawBufferPointer? = nil,
                malformedEscape: Bool = false, userIsPhone: Bool = false, verstat: UnsafeRawBufferPointer? = nil,
                displayName: UnsafeRawBufferPointer? = nil) {
        self.scheme = scheme
        self.number = number
        self.phoneContext = phoneContext
        self.malformedEscape = malformedEscape
        self.userIsPhone = userIsPhone
        self.verstat = verstat
        self.displayName = displayName
    }

    /// A bare number text, not a URI (a contacts file's field, a test).
    public static func bare(_ text: UnsafeRawBufferPointer) -> CallerIdentity {
        CallerIdentity(scheme: .none, number: text)
    }
}
