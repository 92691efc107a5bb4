/// Request methods lookupd recognises (RFC 3261 and its extensions). Method names are
/// case-sensitive (RFC 3261 §7.1), so `invite` is `.other`.
///
/// Threading: a plain value; `Sendable`.
public enum SIPMethod: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case invite, ack, cancel, bye, options, register, prack, update, info, subscribe, notify, refer, message, publish
    case other

    /// The canonical method name; empty for `.other` (read `SIPRequest.methodText` instead).
    public var name: String {
        switch self {
        case .invite: "INVITE"
        case .ack: "ACK"
        case .cancel: "CANCEL"
        case .bye: "BYE"
        case .options: "OPTIONS"
        case .register: "REGISTER"
        case .prack: "PRACK"
        case .update: "UPDATE"
        case .info: "INFO"
        case .subscribe: "SUBSCRIBE"
        case .notify: "NOTIFY"
        case .refer: "REFER"
        case .message: "MESSAGE"
        case .publish: "PUBLISH"
        case .other: ""
        }
    }

    public var description: String { self == .other ? "other" : name }

    init(_ text: SIPText) {
        // Dispatch on length first: this runs for every packet.
        switch text.count {
        case 3:
            if text.exactlyEqualsLiteral("ACK") { self = .ack; return }
            if text.exactlyEqualsLiteral("BYE") { self = .bye; return }
        case 4:
            if text.exactlyEqualsLiteral("INFO") { self = .info; return }
        case 5:
            if text.exactlyEqualsLiteral("PRACK") { self = .prack; return }
            if text.exactlyEqualsLiteral("REFER") { self = .refer; return }
        case 6:
            if text.exactlyEqualsLiteral("INVITE") { self = .invite; return }
            if text.exactlyEqualsLiteral("CANCEL") { self = .cancel; return }
            if text.exactlyEqualsLiteral("UPDATE") { self = .update; return }
            if text.exactlyEqualsLiteral("NOTIFY") { self = .notify; return }
        case 7:
            if text.exactlyEqualsLiteral("OPTIONS") { self = .options; return }
            if text.exactlyEqualsLiteral("MESSAGE") { self = .message; return }
            if text.exactlyEqualsLiteral("PUBLISH") { self = .publish; return }
        case 8:
            if text.exactlyEqualsLiteral("REGISTER") { self = .register; return }
        case 9:
            if text.exactlyEqualsLiteral("SUBSCRIBE") { self = .subscribe; return }
        default:
            break
        }
        self = .other
    }
}

/// Headers named in malformation reports.
///
/// Threading: a plain value; `Sendable`.
public enum SIPHeaderName: Sendable, Hashable, CustomStringConvertible {
    case via, from, to, callID, cseq, maxForwards, contentLength, require, proxyRequire

    public var description: String {
        switch self {
        case .require: "Require"
        case .proxyRequire: "Proxy-Require"
        case .via: "Via"
        case .from: "From"
        case .to: "To"
        case .callID: "Call-ID"
        case .cseq: "CSeq"
        case .maxForwards: "Max-Forwards"
        case .contentLength: "Content-Length"
        }
    }
}

/// Why a request-looking packet was refused by `SIPParser.parse`. Every case maps to
/// 400 Bad Request when the packet carries enough to be answered.
///
/// Threading: a plain value; `Sendable`.
public enum SIPMalformation: Sendable, Hashable, CustomStringConvertible {
    /// Not `Method SP Request-URI SP SIP/x.y` with single spaces.
    case badRequestLine
    /// The Request-URI has no valid scheme, or a sip:/sips:/tel: URI does not parse.
    case badRequestURI
    /// A header line without `name:` (or a continuation line with nothing to continue).
    case badHeaderLine
    /// A bare CR, or a NUL outside a quoted-pair, in the header section.
    case invalidCharacter
    /// The datagram ends inside a header line.
    case unterminatedHeaderSection
    case missingHeader(SIPHeaderName)
    case duplicateHeader(SIPHeaderName)
    /// Non-numeric, negative, overflowing or conflicting Content-Length.
    case badContentLength
    /// Fewer body bytes than Content-Length announces.
    case truncatedBody
    /// CSeq is not `number method`, or the number exceeds 2^32-1.
    case badCSeq
    case badMaxForwards
    /// libosip2 (or lookupd's own reading) rejected one of the headers lookupd relies on.
    case invalidHeader(SIPHeaderName)

    public var description: String {
        switch self {
        case .badRequestLine: "malformed request line"
        case .badRequestURI: "malformed Request-URI"
        case .badHeaderLine: "malformed header line"
        case .invalidCharacter: "invalid character in header section"
        case .unterminatedHeaderSection: "unterminated header section"
        case .missingHeader(let h): "missing \(h)"
        case .duplicateHeader(let h): "duplicate \(h)"
        case .badContentLength: "invalid Content-Length"
        case .truncatedBody: "body shorter than Content-Length"
        case .badCSeq: "invalid CSeq"
        case .badMaxForwards: "invalid Max-Forwards"
        case .invalidHeader(let h): "invalid \(h)"
        }
    }

    /// The reason phrase of the 400 (RFC 3261 §21.4.1 asks for the problem in more detail).
    public var reasonPhrase: String {
        switch self {
        case .missingHeader(.via): "Missing Via"
        case .missingHeader(.from): "Missing From"
        case .missingHeader(.to): "Missing To"
        case .missingHeader(.callID): "Missing Call-ID"
        case .missingHeader(.cseq): "Missing CSeq"
        case .duplicateHeader(.from): "Duplicate From"
        case .duplicateHeader(.to): "Duplicate To"
        case .duplicateHeader(.callID): "Duplicate Call-ID"
        case .duplicateHeader(.cseq): "Duplicate CSeq"
        case .duplicateHeader(.maxForwards): "Duplicate Max-Forwards"
        case .duplicateHeader(.contentLength), .badContentLength: "Bad Content-Length"
        case .truncatedBody: "Body Shorter Than Content-Length"
        case .badCSeq: "Bad CSeq"
        case .badMaxForwards: "Bad Max-Forwards"
        case .badRequestURI: "Bad Request-URI"
        default: "Bad Request"
        }
    }
}

/// What `SIPParser.parse` made of a datagram (or of one framed stream message).
///
/// Threading: a plain value; `Sendable` (it carries no view of the packet).
public enum SIPParseOutcome: Sendable, Hashable {
    /// A well-formed request; read it through `SIPParser.request` until the next `parse`.
    case request
    /// A SIP response (status line). A redirect server never expects one: drop it.
    case response
    /// Only CR/LF bytes (RFC 5626 keep-alive). Over TCP use `SIPStreamFramer` to decide on a pong.
    case keepAlive
    /// Larger than the parser's `maxMessageSize`; not looked at.
    case tooLarge
    /// Looks like a SIP request but is not well-formed. When `canRespond` is true the raw
    /// Via/From/To/Call-ID/CSeq were found, so `SIPParser.request` can write a 400 (see
    /// `SIPRejection(malformation:)`); otherwise drop it. Never true for ACK.
    case malformed(SIPMalformation, canRespond: Bool)
    /// Not SIP at all (binary, HTTP, a lone line...): drop silently.
    case garbage
}

/// Well-known `Privacy` values (RFC 3323, RFC 3325, RFC 4244) as a set.
///
/// Threading: a plain value; `Sendable`.
public struct SIPPrivacy: OptionSet, Sendable, Hashable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let header = SIPPrivacy(rawValue: 1 << 0)
    public static let session = SIPPrivacy(rawValue: 1 << 1)
    public static let user = SIPPrivacy(rawValue: 1 << 2)
    /// The `none` value (named so it cannot be mistaken for `Optional.none`).
    public static let noneRequested = SIPPrivacy(rawValue: 1 << 3)
    public static let critical = SIPPrivacy(rawValue: 1 << 4)
    public static let id = SIPPrivacy(rawValue: 1 << 5)
    public static let history = SIPPrivacy(rawValue: 1 << 6)
    /// Some token not listed above was present (read `SIPRequest.privacyTokens`).
    public static let other = SIPPrivacy(rawValue: 1 << 15)

    init(token: SIPText) {
        switch token.count {
        case 2 where token.equalsLiteral("id"): self = .id
        case 4 where token.equalsLiteral("user"): self = .user
        case 4 where token.equalsLiteral("none"): self = .noneRequested
        case 6 where token.equalsLiteral("header"): self = .header
        case 7 where token.equalsLiteral("session"): self = .session
        case 7 where token.equalsLiteral("history"): self = .history
        case 8 where token.equalsLiteral("critical"): self = .critical
        default: self = .other
        }
    }
}
