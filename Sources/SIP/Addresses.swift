/// URI schemes lookupd distinguishes. Scheme names are case-insensitive (RFC 3986 §3.1).
///
/// Threading: a plain value; `Sendable`.
public enum SIPURIScheme: Sendable, Hashable {
    case sip, sips, tel, other
}

/// `;name[=value]` parameters, read lazily from the wire text (no allocation).
/// Values are returned as written (a quoted value keeps its quotes; nothing is unescaped).
///
/// Threading and lifetime: as `SIPText`.
public struct SIPParameters: Sequence {
    /// The raw parameter text, starting at the first `;` (or empty).
    public let text: SIPText

    init(_ text: SIPText) { self.text = text }

    public struct Parameter {
        public let name: SIPText
        /// `nil` when the parameter has no `=value` (`;lr`, `;rport`).
        public let value: SIPText?
    }

    public struct Iterator: IteratorProtocol {
        let text: SIPText
        var position = 0

        // Inlined into each loop over the parameters (the top Via's rewriting, the caller's
        // identity): a call per parameter returned its optional pair of texts through memory.
        @inline(__always)
        public mutating func next() -> Parameter? {
            // Items are separated by ';'; quoted values may contain ';' (as `nextSeparator`).
            // Written out on the raw bytes: this runs for every tag, branch and rport lookup.
            guard let p = text.baseAddress else { return nil }
            let n = text.count
            @inline(__always) func at(_ i: Int) -> UInt8 { p.load(fromByteOffset: i, as: UInt8.self) }
            while position < n {
                let start = position
                let end = nextSeparator(in: text, from: start, separator: ASCII.semicolon, respectAngles: false)
                position = end + 1
                var lo = start, hi = end
                while lo < hi, isLWS(at(lo)) { lo += 1 }
                while hi > lo, isLWS(at(hi - 1)) { hi -= 1 }
                if lo == hi { continue }
                let eq = firstOf(ASCII.equals, ASCII.equals, in: p, from: lo, to: hi)
                if eq == hi { return Parameter(name: SIPText(baseAddress: p + lo, count: hi - lo), value: nil) }
                var nameEnd = eq
                while nameEnd > lo, isLWS(at(nameEnd - 1)) { nameEnd -= 1 }
                var valueStart = eq + 1
                while valueStart < hi, isLWS(at(valueStart)) { valueStart += 1 }
                return Parameter(name: SIPText(baseAddress: p + lo, count: nameEnd - lo),
                                 value: SIPText(baseAddress: p + valueStart, count: hi - valueStart))
            }
            return nil
        }
    }

    public func makeIterator() -> Iterator { Iterator(text: text) }

    /// The value of the first parameter called `name` (case-insensitive); an empty text for a
    /// parameter without a value; `nil` when absent.
    public func value(_ name: StaticString) -> SIPText? {
        for p in self where p.name.equalsLiteral(name) { return p.value ?? .empty }
        return nil
    }

    /// As `value(_:)`, for a run-time name.
    public func value(named name: String) -> SIPText? {
        for p in self where p.name.equalsIgnoringCase(name) { return p.value ?? .empty }
        return nil
    }

    public func contains(_ name: StaticString) -> Bool { value(name) != nil }
}

/// A URI as found on the wire.
///
/// For `sip:`/`sips:` the user part is everything before the last `@` (minus `:password`), so
/// carrier quirks such as `sip:+4930123;cpc=ordinary@host` keep `;cpc=ordinary` in `user`.
/// For `tel:` the "user" is the number before the first `;`, and the rest are `parameters`.
/// Other schemes only expose `scheme`/`schemeText`/`text`.
///
/// Threading and lifetime: as `SIPText`.
public struct SIPURI {
    /// The complete URI text (without `<` `>`).
    public var text: SIPText = .empty
    public var scheme: SIPURIScheme = .other
    public var schemeText: SIPText = .empty
    /// The user part (sip/sips) or number (tel) exactly as written, still %-escaped.
    public var rawUser: SIPText?
    /// `rawUser` with %-escapes decoded (a `%00` becomes a NUL byte; nothing is truncated).
    public var user: SIPText?
    /// Host of a sip/sips URI; an IPv6 reference keeps its brackets.
    public var host: SIPText?
    public var port: Int?
    /// URI parameters (`;user=phone;verstat=...`); for tel: the parameters after the number.
    public var parameters = SIPParameters(.empty)
    /// The `?headers` part of a sip/sips URI, without the `?`.
    public var headers: SIPText = .empty

    public init() {}

    /// The caller-identity text: the %-unescaped user part of a sip:/sips: URI or the number of
    /// a tel: URI; `nil` for other schemes or a URI without user part (`sip:anonymous.invalid`).
    /// Normalisation to E.164 is left to the caller.
    public var userOrNumber: SIPText? {
        switch scheme {
        case .sip, .sips, .tel: return user
        case .other: return nil
        }
    }
}

/// A name-addr / addr-spec header value (From, To, P-Asserted-Identity).
///
/// Threading and lifetime: as `SIPText`.
public struct SIPNameAddress {
    /// The display name with surrounding quotes removed and quoted-pairs resolved; `nil` when
    /// there is none.
    public var displayName: SIPText?
    /// The display name as written (with quotes, if it was quoted).
    public var rawDisplayName: SIPText?
    public var uri = SIPURI()
    /// Header parameters after the URI (`;tag=...`).
    public var parameters = SIPParameters(.empty) { didSet { notedTag = .unknown } }
    var notedTag = NotedParameter.unknown

    public init() {}

    public var tag: SIPText? {
        if case .known(let value) = notedTag { return value }
        return parameters.value("tag")
    }
}

/// A parameter's value, noted by a one-walk reader (`readPlainNameAddress`, `readPlainVia`)
/// as it checked the parameters: the From tag, To tag and Via branch are asked for by every
/// response and decision id, and searching the parameters costs about 140 instructions a
/// parameter. Setting `parameters` any other way makes it `.unknown` again.
enum NotedParameter {
    case unknown
    /// As `SIPParameters.value(_:)` gives it.
    case known(SIPText?)
}

/// What `writeVia` needs to know of a Via's parameters to copy them as written, noted by the
/// one walk over plain parameter text (no white space, no quotes, no empty item).
enum NotedRport {
    /// Not noted (or not simple): `writeVia` goes through the parameters one by one.
    case unknown
    /// No `received` and at most one `rport`: its item (from its `;` to the end of its value)
    /// as offsets into the parameter text, nil when there is none.
    case known(Range<Int>?)
}

/// The top Via header field value, as read by lookupd.
///
/// Threading and lifetime: as `SIPText`.
public struct SIPVia {
    public var protocolName: SIPText = .empty
    public var protocolVersion: SIPText = .empty
    /// UDP, TCP, TLS, SCTP, WS, ... as written.
    public var transport: SIPText = .empty
    /// The sent-by host; an IPv6 address without brackets.
    public var host: SIPText = .empty
    public var port: Int?
    public var parameters = SIPParameters(.empty) { didSet { notedBranch = .unknown; notedRport = .unknown } }
    var notedBranch = NotedParameter.unknown
    /// Noted by the one walk (`readPlainVia`) for `writeVia`.
    var notedRport = NotedRport.unknown

    public init() {}

    public var branch: SIPText? {
        if case .known(let value) = notedBranch { return value }
        return parameters.value("branch")
    }
    /// RFC 3581: the client asked for symmetric response routing.
    public var hasRport: Bool { parameters.contains("rport") }
    public var received: SIPText? { parameters.value("received") }
}
