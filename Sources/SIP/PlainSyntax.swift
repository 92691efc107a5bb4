import CSIPLexer

// Cheap checks that spare libosip2's per-header parsers the common case.
//
// libosip2 judges the headers lookupd relies on (SIPParser.parse), and it is lenient: it accepts
// far more than the plain shapes PBXs and carriers send. Each function here recognises one plain
// shape in a single pass over the bytes, and answers `true` only for text libosip2 5.3 is known to
// accept; for anything else (quoted-pairs, token display names, comments, IPv6 parameters, a
// `?headers` part, odd spacing...) it answers `false` and the caller asks libosip2 as before. So
// the verdict never changes: a `true` here stands for what osip would have said, a `false` costs
// only the osip call it always cost. `Tests/SIPTests/PlainSyntaxTests.swift` checks
// "plain implies osip accepts" against the real library on generated and mutated values.
//
// The conditions each shape must meet, read from libosip2's parsers:
// - osip_uri_parse (sip/sips): scheme letters only; a user part, if any, non-empty and up to the
//   first '@' (so at most one '@'); no '?' (a '?' before a ';' is a syntax error); a non-empty
//   host; a port of 1 to 7 characters after ':'; IPv6 references in brackets. Other schemes:
//   at least two characters after ':'.
// - osip_from_parse: a quoted display name ends at the first unescaped '"' and may be followed by
//   spaces only before '<'; the URI ends at the first '>'; generic parameters need non-empty names
//   and, after '=', non-empty values; the URI is at least six characters. Without '<' the URI ends
//   at the first ';'.
// - osip_via_parse: `proto/version/transport`, one space, host; a '(' starts a comment; ports
//   non-empty and numeric; parameters as above.
// - osip_call_id_parse: an '@' neither first nor last.
// - osip_cseq_parse: a non-empty number, one space, a non-empty method.

/// The byte classes of the plain shapes, as bits of CSIPLexer's 256-entry table
/// `lookupd_sip_classes` (SIPClasses.c): a test is one load and one AND.
/// PlainSyntaxTests checks the table against these definitions:
/// - user: RFC 3261 unreserved, escaped and user-unreserved, without '?' (see above):
///   alphanumerics and `-_.!~*'()%&=+$,;/`;
/// - userNoSemicolon: the same without ';' (in an addr-spec the first ';' ends the URI);
/// - host: host names and IPv4 addresses: alphanumerics and `-.`;
/// - ipv6: inside an IPv6 reference: hex digits, `:` and `.`;
/// - uriParameter: paramchar without '?': alphanumerics and `-_.!~*'()%[]/:&+$`;
/// - opaque: the body of a tel: URI: uriParameter plus `;=,`;
/// - token: RFC 3261 token: alphanumerics and ``-.!%*_+`'~``.
struct ByteClass {
    let bit: UInt8

    @inline(__always) func contains(_ b: UInt8) -> Bool { lookupd_sip_class(b) & bit != 0 }

    static var user: ByteClass { ByteClass(bit: UInt8(LOOKUPD_SIP_USER)) }
    static var userNoSemicolon: ByteClass { ByteClass(bit: UInt8(LOOKUPD_SIP_USER_NO_SEMICOLON)) }
    static var host: ByteClass { ByteClass(bit: UInt8(LOOKUPD_SIP_HOST)) }
    static var ipv6: ByteClass { ByteClass(bit: UInt8(LOOKUPD_SIP_IPV6)) }
    static var uriParameter: ByteClass { ByteClass(bit: UInt8(LOOKUPD_SIP_URI_PARAMETER)) }
    static var opaque: ByteClass { ByteClass(bit: UInt8(LOOKUPD_SIP_OPAQUE)) }
    static var token: ByteClass { ByteClass(bit: UInt8(LOOKUPD_SIP_TOKEN)) }
}

/// A cursor over one value, on the raw bytes; every step checks bounds.
private struct Scanner {
    let p: UnsafeRawPointer
    let count: Int
    var i = 0

    @inline(__always) init(_ text: SIPText) {
        // An empty text has no base address; any address works since nothing is read.
        p = text.baseAddress ?? UnsafeRawPointer(bitPattern: 1).unsafelyUnwrapped
        count = text.count
    }

    @inline(__always) var atEnd: Bool { i >= count }
    @inline(__always) func byte(_ at: Int) -> UInt8 { p.load(fromByteOffset: at, as: UInt8.self) }
    /// The current byte; only valid when not `atEnd`.
    @inline(__always) var current: UInt8 { byte(i) }

    @inline(__always) mutating func skip(_ set: ByteClass) -> Int {
        let start = i
        while i < count, set.contains(byte(i)) { i += 1 }
        return i - start
    }

    @inline(__always) mutating func take(_ b: UInt8) -> Bool {
        guard i < count, byte(i) == b else { return false }
        i += 1
        return true
    }

    /// Inside a quoted display name: up to its closing quote (not taken), stopping at a
    /// backslash or a control character (not plain).
    @inline(__always) mutating func skipPlainQuoted() {
        while i < count {
            let b = byte(i)
            if b == ASCII.quote || b == ASCII.backslash || b < 0x20 || b == ASCII.del { break }
            i += 1
        }
    }

    /// `host [':' 1*5DIGIT]` where host is a name/IPv4 or a bracketed IPv6 reference.
    @inline(__always) mutating func hostPort() -> Bool {
        if take(ASCII.leftBracket) {
            guard skip(.ipv6) > 0, take(ASCII.rightBracket) else { return false }
        } else {
            guard skip(.host) > 0 else { return false }
        }
        if take(ASCII.colon) {
            let start = i
            while i < count, isDigit(byte(i)) { i += 1 }
            guard i > start, i - start <= 5 else { return false }
        }
        return true
    }

    /// `1*5DIGIT` after a ':', as a port of at most 65535 (the readers' limit).
    @inline(__always) mutating func port() -> Int? {
        let start = i
        var value = 0
        while i < count, isDigit(byte(i)) {
            value = value &* 10 &+ Int(byte(i) &- 0x30)
            i += 1
        }
        guard i > start, i - start <= 5, value <= 65535 else { return nil }
        return value
    }

    /// `*( ';' name [ '=' value ] )` with both from `set`, names and values non-empty.
    @inline(__always) mutating func parameters(_ set: ByteClass) -> Bool {
        var unused: SIPText?
        return parameters(set, noting: "", into: &unused)
    }

    /// `parameters(set)`, with the value of the first parameter called `name` (as
    /// `SIPParameters.value(name)` finds it in such plain text: no white space, no quotes).
    @inline(__always) mutating func parameters(_ set: ByteClass, noting name: StaticString, into noted: inout SIPText?) -> Bool {
        noted = nil
        var found = name.utf8CodeUnitCount == 0
        while take(ASCII.semicolon) {
            let nameStart = i
            guard skip(set) > 0 else { return false }
            let wanted = !found && SIPText(baseAddress: p + nameStart, count: i - nameStart).equalsLiteral(name)
            var value = SIPText.empty
            if take(ASCII.equals) {
                let valueStart = i
                guard skip(set) > 0 else { return false }
                value = SIPText(baseAddress: p + valueStart, count: i - valueStart)
            }
            if wanted {
                noted = value
                found = true
            }
        }
        return true
    }
}

/// A plain `sip:`/`sips:`/`tel:` URI (the whole text). `allowSemicolonInUser` is false for an
/// addr-spec, where osip ends the URI at the first ';'.
func isPlainURI(_ uri: SIPText, allowSemicolonInUser: Bool = true) -> Bool {
    guard uri.count >= 5 else { return false }
    var s = Scanner(uri)
    let b0 = s.byte(0) | 0x20, b1 = s.byte(1) | 0x20, b2 = s.byte(2) | 0x20, b3 = s.byte(3)
    if b0 == UInt8(ascii: "t"), b1 == UInt8(ascii: "e"), b2 == UInt8(ascii: "l"), b3 == ASCII.colon {
        // Opaque for osip: at least two characters after the colon. Not ending in ';', so that
        // the first ';' after the URI is the one that starts the header parameters.
        s.i = 4
        let set: ByteClass = allowSemicolonInUser ? .opaque : .uriParameter
        return s.skip(set) >= 2 && s.atEnd && s.byte(s.count - 1) != ASCII.semicolon
    }
    guard b0 == UInt8(ascii: "s"), b1 == UInt8(ascii: "i"), b2 == UInt8(ascii: "p") else { return false }
    if b3 == ASCII.colon {
        s.i = 4
    } else if b3 | 0x20 == UInt8(ascii: "s"), s.byte(4) == ASCII.colon {
        s.i = 5
    } else {
        return false
    }
    // A user part runs to the '@'; one '@' only (osip takes the first, lookupd's reader the last).
    let userStart = s.i
    let user = s.skip(allowSemicolonInUser ? .user : .userNoSemicolon)
    if s.take(ASCII.at) {
        guard user > 0 else { return false }
    } else {
        s.i = userStart
    }
    guard s.hostPort() else { return false }
    if allowSemicolonInUser {
        guard s.parameters(.uriParameter) else { return false }
    }
    return s.atEnd
}

/// A plain From/To/P-Asserted-Identity value: `"display" <URI>;params`, `display <URI>;params`,
/// `<URI>;params` or `URI;params`, with token parameters and no quoted-pairs.
func isPlainNameAddress(_ value: SIPText) -> Bool {
    guard value.count >= 6 else { return false }
    var s = Scanner(value)
    let first = s.byte(0)
    if first == ASCII.quote {
        // A display name without backslashes: it ends at the next quote.
        s.i = 1
        s.skipPlainQuoted()
        guard s.take(ASCII.quote) else { return false }
        while s.take(ASCII.space) {}
        guard s.take(ASCII.lessThan) else { return false }
    } else if first == ASCII.lessThan {
        s.i = 1
    } else {
        // A display name made of tokens and spaces (`Bob Smith <sip:...>`): osip skips exactly
        // these characters looking for the '<'. Without one it is an addr-spec.
        while !s.atEnd, ByteClass.token.contains(s.current) || s.current == ASCII.space { s.i += 1 }
        if s.i > 0, s.take(ASCII.lessThan) {
            // name-addr with a token display name
        } else {
            // addr-spec: the URI ends at the first ';'.
            var end = 0
            while end < s.count, s.byte(end) != ASCII.semicolon { end += 1 }
            guard end >= 6, isPlainURI(SIPText(baseAddress: s.p, count: end), allowSemicolonInUser: false) else { return false }
            s.i = end
            return s.parameters(.token) && s.atEnd
        }
    }
    // name-addr: the URI ends at the first '>'.
    let uriStart = s.i
    while !s.atEnd, s.current != ASCII.greaterThan { s.i += 1 }
    guard !s.atEnd, s.i - uriStart >= 6, isPlainURI(SIPText(baseAddress: s.p + uriStart, count: s.i - uriStart)) else { return false }
    s.i += 1
    return s.parameters(.token) && s.atEnd
}

/// A plain Via value: `SIP/2.0/UDP host[:port];params` with token parameters.
func isPlainVia(_ value: SIPText) -> Bool {
    var s = Scanner(value)
    guard s.skip(.token) > 0, s.take(ASCII.slash), s.skip(.token) > 0, s.take(ASCII.slash),
          s.skip(.token) > 0, s.take(ASCII.space) else { return false }
    guard s.hostPort() else { return false }
    return s.parameters(.token) && s.atEnd
}

/// A plain Call-ID: visible ASCII, at most one '@', neither first nor last.
///
/// Eight bytes at a time: with `ones` = 0x01 in every byte, `(x - 0x21·ones) & ~x` has a high
/// bit set exactly when some byte is below 0x21, and `(x + ones) | x` when some byte is 0x7F or
/// above (no borrow or carry crosses bytes unless such a byte is there). `PlainSyntaxTests`
/// compares it with the byte-by-byte definition.
func isPlainCallID(_ value: SIPText) -> Bool {
    guard let p = value.baseAddress else { return false }
    let n = value.count
    let ones: UInt64 = 0x0101_0101_0101_0101
    guard var i = wordsWithout(p, n, { x in ((x &- ones &* 0x21) & ~x) | (x &+ ones) | x }) else { return false }
    while i < n {
        let b = p.load(fromByteOffset: i, as: UInt8.self)
        guard b > 0x20, b < 0x7F else { return false }
        i += 1
    }
    let at = firstOf(ASCII.at, ASCII.at, in: p, from: 0, to: n)
    if at == n { return true }
    return at != 0 && at != n - 1 && firstOf(ASCII.at, ASCII.at, in: p, from: at + 1, to: n) == n
}

/// A plain CSeq: `1*DIGIT SP token`.
func isPlainCSeq(_ value: SIPText) -> Bool {
    var s = Scanner(value)
    while !s.atEnd, isDigit(s.current) { s.i += 1 }
    guard s.i > 0, s.take(ASCII.space), s.skip(.token) > 0 else { return false }
    return s.atEnd
}

// MARK: - The plain check and the reading in one walk
//
// The parser used to check a value's plain shape (above) and then read it again
// (WireParsing.swift): two or three walks of each From, To, Request-URI and top Via. The
// functions below do both in one walk, writing the parts straight into the parser's store (a
// returned optional of these structs costs several copies of them). Each returns true and
// writes exactly what the two steps together give for a plain value (`SIPURI.read`,
// `SIPNameAddress.read`, `SIPVia.read`: the same pieces of the same bytes), every field, so
// nothing of an earlier value is left; it returns false for anything else: a value that is not
// plain, one the reader would refuse (a port above 65535), and shapes left to the two steps
// (tel: URIs, a value starting with white space). The target is then not meaningful, and the
// caller takes the two steps as before, so no verdict changes. `PlainSyntaxTests` compares the
// one walk with the two steps on generated values, writing over a different earlier value.

/// `isPlainURI(uri, allowSemicolonInUser:)` and `SIPURI.read(uri)` in one walk, for sip: and
/// sips: URIs.
func readPlainSIPURI(_ uri: SIPText, allowSemicolonInUser: Bool = true, into result: inout SIPURI, arena: inout Arena) -> Bool {
    guard uri.count >= 5 else { return false }
    var s = Scanner(uri)
    guard s.byte(0) | 0x20 == UInt8(ascii: "s"), s.byte(1) | 0x20 == UInt8(ascii: "i"),
          s.byte(2) | 0x20 == UInt8(ascii: "p") else { return false }
    let b3 = s.byte(3)
    if b3 == ASCII.colon {
        s.i = 4
        result.scheme = .sip
    } else if b3 | 0x20 == UInt8(ascii: "s"), s.byte(4) == ASCII.colon {
        s.i = 5
        result.scheme = .sips
    } else {
        return false
    }
    result.text = uri
    result.schemeText = SIPText(baseAddress: s.p, count: s.i - 1)
    // No '@' in the user, host or parameter classes: the one '@' is the last one too.
    let userStart = s.i
    let userClass: ByteClass = allowSemicolonInUser ? .user : .userNoSemicolon
    var escaped = false
    while !s.atEnd {
        let b = s.current
        guard userClass.contains(b) else { break }
        if b == ASCII.percent { escaped = true }
        s.i += 1
    }
    let userLength = s.i - userStart
    if s.take(ASCII.at) {
        guard userLength > 0 else { return false }
        let rawUser = SIPText(baseAddress: s.p + userStart, count: userLength)
        result.rawUser = rawUser
        // Without a '%' the decoded user is the raw one (as percentDecoded returns it).
        result.user = escaped ? arena.percentDecoded(rawUser) : rawUser
    } else {
        s.i = userStart
        result.rawUser = nil
        result.user = nil
    }
    let hostStart = s.i
    if s.take(ASCII.leftBracket) {
        guard s.skip(.ipv6) > 0, s.take(ASCII.rightBracket) else { return false }
    } else {
        guard s.skip(.host) > 0 else { return false }
    }
    result.host = SIPText(baseAddress: s.p + hostStart, count: s.i - hostStart)
    if s.take(ASCII.colon) {
        guard let port = s.port() else { return false }
        result.port = port
    } else {
        result.port = nil
    }
    let parametersStart = s.i
    if allowSemicolonInUser {
        guard s.parameters(.uriParameter) else { return false }
    }
    guard s.atEnd else { return false }
    result.parameters = SIPParameters(SIPText(baseAddress: s.p + parametersStart, count: s.count - parametersStart))
    result.headers = .empty
    return true
}

/// `isPlainNameAddress(value)` and `SIPNameAddress.read(value)` in one walk.
func readPlainNameAddress(_ value: SIPText, into result: inout SIPNameAddress, arena: inout Arena) -> Bool {
    guard value.count >= 6 else { return false }
    var s = Scanner(value)
    let first = s.byte(0)
    if first == ASCII.quote {
        s.i = 1
        s.skipPlainQuoted()
        let close = s.i
        guard s.take(ASCII.quote) else { return false }
        // No quoted-pair inside: the name is the bytes between the quotes.
        result.rawDisplayName = SIPText(baseAddress: s.p, count: close + 1)
        result.displayName = SIPText(baseAddress: s.p + 1, count: close - 1)
        while s.take(ASCII.space) {}
        guard s.take(ASCII.lessThan) else { return false }
    } else if first == ASCII.lessThan {
        s.i = 1
        result.rawDisplayName = nil
        result.displayName = nil
    } else {
        guard ByteClass.token.contains(first) else { return false }
        while !s.atEnd, ByteClass.token.contains(s.current) || s.current == ASCII.space { s.i += 1 }
        if s.take(ASCII.lessThan) {
            // A token display name: without its trailing spaces, nothing to unfold.
            var end = s.i - 1
            while end > 0, s.byte(end - 1) == ASCII.space { end -= 1 }
            let display = SIPText(baseAddress: s.p, count: end)
            result.rawDisplayName = display
            result.displayName = display
        } else {
            // addr-spec: the URI ends at the first ';'.
            let end = firstOf(ASCII.semicolon, ASCII.semicolon, in: s.p, from: 0, to: s.count)
            guard end >= 6,
                  readPlainSIPURI(SIPText(baseAddress: s.p, count: end), allowSemicolonInUser: false, into: &result.uri, arena: &arena)
            else { return false }
            s.i = end
            var tag: SIPText?
            guard s.parameters(.token, noting: "tag", into: &tag), s.atEnd else { return false }
            result.rawDisplayName = nil
            result.displayName = nil
            result.parameters = SIPParameters(SIPText(baseAddress: s.p + end, count: s.count - end))
            result.notedTag = .known(tag)
            return true
        }
    }
    // name-addr: the URI ends at the first '>' (searched eight bytes at a time).
    let uriStart = s.i
    s.i = firstOf(ASCII.greaterThan, ASCII.greaterThan, in: s.p, from: s.i, to: s.count)
    guard !s.atEnd, s.i - uriStart >= 6,
          readPlainSIPURI(SIPText(baseAddress: s.p + uriStart, count: s.i - uriStart), into: &result.uri, arena: &arena)
    else { return false }
    s.i += 1
    let parametersStart = s.i
    var tag: SIPText?
    guard s.parameters(.token, noting: "tag", into: &tag), s.atEnd else { return false }
    result.parameters = SIPParameters(SIPText(baseAddress: s.p + parametersStart, count: s.count - parametersStart))
    result.notedTag = .known(tag)
    return true
}

/// `isPlainVia(value)` and `SIPVia.read(value)` in one walk.
func readPlainVia(_ value: SIPText, into via: inout SIPVia) -> Bool {
    var s = Scanner(value)
    @inline(__always) func piece(_ from: Int, _ to: Int) -> SIPText { SIPText(baseAddress: s.p + from, count: to - from) }
    guard s.skip(.token) > 0 else { return false }
    via.protocolName = piece(0, s.i)
    guard s.take(ASCII.slash) else { return false }
    var start = s.i
    guard s.skip(.token) > 0 else { return false }
    via.protocolVersion = piece(start, s.i)
    guard s.take(ASCII.slash) else { return false }
    start = s.i
    guard s.skip(.token) > 0 else { return false }
    via.transport = piece(start, s.i)
    guard s.take(ASCII.space) else { return false }
    start = s.i
    if s.take(ASCII.leftBracket) {
        // The sent-by host of an IPv6 reference without its brackets, as SIPVia.read has it.
        guard s.skip(.ipv6) > 0, s.take(ASCII.rightBracket) else { return false }
        via.host = piece(start + 1, s.i - 1)
    } else {
        guard s.skip(.host) > 0 else { return false }
        via.host = piece(start, s.i)
    }
    if s.take(ASCII.colon) {
        guard let port = s.port() else { return false }
        via.port = port
    } else {
        via.port = nil
    }
    start = s.i
    // `parameters(.token, noting: "branch")`, also noting the one `rport` item for `writeVia`:
    // with no `received` and no second `rport` it copies the rest of the text as written.
    var branch: SIPText?
    var foundBranch = false
    var rport: Range<Int>?
    var simple = true
    while s.take(ASCII.semicolon) {
        let itemStart = s.i - 1
        let nameStart = s.i
        guard s.skip(.token) > 0 else { return false }
        let name = piece(nameStart, s.i)
        var value = SIPText.empty
        if s.take(ASCII.equals) {
            let valueStart = s.i
            guard s.skip(.token) > 0 else { return false }
            value = piece(valueStart, s.i)
        }
        switch name.count {
        case 5 where name.equalsLiteral("rport"):
            if rport == nil { rport = (itemStart - start)..<(s.i - start) } else { simple = false }
        case 6 where !foundBranch && name.equalsLiteral("branch"):
            branch = value
            foundBranch = true
        case 8 where name.equalsLiteral("received"):
            simple = false
        default:
            break
        }
    }
    guard s.atEnd else { return false }
    via.parameters = SIPParameters(piece(start, s.count))
    via.notedBranch = .known(branch)
    via.notedRport = simple ? .known(rport) : .unknown
    return true
}
