import Glibc
import TextFormats
import TextRules

/// Where the request came from: the socket peer, not anything the request claims.
///
/// Threading: a plain value; `Sendable`.
public struct SIPSourceAddress: Sendable, Hashable {
    /// Textual IPv4 or IPv6 address (no brackets, no port).
    public var ip: String
    public var port: UInt16

    public init(ip: String, port: UInt16) {
        self.ip = ip
        self.port = port
    }
}

/// The `Contact` of a (typically 3xx) response.
///
/// Threading: a plain value; `Sendable`.
public enum SIPContact: Sendable, Hashable {
    /// `Contact: <Request-URI of the request>`.
    case requestURI
    /// `Contact: <uri>`; the URI must not contain spaces, control characters, `<`, `>` or `"`.
    case uri(String)
    /// `Contact: <scheme:USER@host>`, USER the Request-URI's user part as written (left out,
    /// with its `@`, when there is none): the same callee at another host (`redirect-target`).
    /// `host` is everything after the `@` (`pbx.example.net:5060;transport=udp`), no `?`;
    /// the same rules as `uri`.
    case requestUser(scheme: String, host: String)
}

/// The URI of the `P-Asserted-Identity` written with a label.
///
/// Threading: a plain value; `Sendable` (`.from`/`.assertedIdentity` are resolved against the
/// request the response is written for).
public enum SIPIdentityURI: Sendable, Hashable {
    /// The request's From URI.
    case from
    /// The request's n-th valid P-Asserted-Identity URI.
    case assertedIdentity(Int)
    /// The request's n-th valid Remote-Party-ID (draft-ietf-sip-privacy-04, as PBXs still send it).
    case remotePartyID(Int)
    /// The request's n-th valid P-Preferred-Identity (RFC 3325 §9.2).
    case preferredIdentity(Int)
    case uri(String)
}

/// A caller label (a name from the directory), as UTF-8.
///
/// Threading: not `Sendable` because of `.buffer`; build it on the thread that writes.
public enum SIPLabel {
    case string(String)
    case bytes([UInt8])
    /// Bytes the caller keeps alive for the duration of the write (e.g. a mapped directory).
    case buffer(UnsafeRawBufferPointer)
}

/// Why a label was left out of a response.
///
/// Threading: a plain value; `Sendable`.
public enum SIPLabelRefusal: Sendable, Hashable {
    case empty
    /// More than `SIPResponse.maxLabelBytes` bytes.
    case tooLong
    /// A control character (C0, DEL, C1), a line or paragraph separator or a bidirectional
    /// control (LabelRules): could end the header (CR LF), confuse the receiver or make the
    /// phone display something else than was written.
    case controlCharacter
    case invalidUTF8
}

/// Everything a response adds to what is copied from the request.
///
/// Threading: a plain value (not `Sendable` only because of `SIPLabel.buffer`).
public struct SIPResponse {
    public static let maxLabelBytes = 255

    public var statusCode: Int
    public var reasonPhrase: String
    /// Source of the request, for RFC 3581 `received`/`rport` on the top Via.
    public var source: SIPSourceAddress
    public var contact: SIPContact?
    /// Written as the display name of `P-Asserted-Identity` (when `identity` is set) and as
    /// the value of the `labelHeaderName` header, always as an escaped quoted-string.
    public var label: SIPLabel?
    public var identity: SIPIdentityURI?
    public var labelHeaderName: String
    /// False: the label goes in the label header only, not also as the P-Asserted-Identity
    /// display name (a smaller answer, when one must be bounded).
    public var labelInIdentity = true
    /// `"` and `\` of the label written as `'` and `/` instead of escaped (`label-escapes`).
    public var plainQuotedStrings = false
    /// Written after everything else, in order (e.g. `Reason`, `Retry-After`, `Allow`).
    public var headers: [SIPHeaderField]
    /// The Contact URI gets lookupd's redirect mark (`RedirectMark`), so that a request sent
    /// to it that reaches lookupd again is known as one that came back (`returnsFromRedirect`).
    public var marksContact = false

    public init(statusCode: Int, reasonPhrase: String, source: SIPSourceAddress,
                contact: SIPContact? = nil, label: SIPLabel? = nil, identity: SIPIdentityURI? = nil,
                labelHeaderName: String = "X-Caller-Label", headers: [SIPHeaderField] = []) {
        self.statusCode = statusCode
        self.reasonPhrase = reasonPhrase
        self.source = source
        self.contact = contact
        self.label = label
        self.identity = identity
        self.labelHeaderName = labelHeaderName
        self.headers = headers
    }

    /// The response for a rejection from the protocol checks or a malformed request.
    public init(_ rejection: SIPRejection, source: SIPSourceAddress) {
        self.init(statusCode: rejection.statusCode, reasonPhrase: rejection.reasonPhrase,
                  source: source, headers: rejection.headers)
    }
}

/// What `writeResponse` did.
///
/// Threading: a plain value; `Sendable`.
public struct SIPWriteResult: Sendable, Hashable {
    /// Bytes written at the start of the buffer.
    public var byteCount: Int
    /// Set when a label was supplied but left out (no display name, no label header).
    public var labelRefusal: SIPLabelRefusal?
    /// Set when an identity was asked for from the request but it has none usable (no such PAI,
    /// or a From URI that cannot be written safely); the P-Asserted-Identity is then omitted.
    public var identityOmitted: Bool
}

/// Why no response was written (the buffer may hold a partial response: do not send it).
/// Apart from `noRequest`, `bufferTooSmall` and an unsafe Request-URI as Contact, these are caller
/// bugs: invalid text in a field that would otherwise reach the wire.
///
/// Threading: a plain value; `Sendable`.
public enum SIPWriteError: Error, Sendable, Hashable {
    /// The last parse produced nothing to answer.
    case noRequest
    case bufferTooSmall
    case invalidStatusCode
    case invalidReasonPhrase
    case invalidSourceAddress
    /// The Contact URI (given, or the request's Request-URI) cannot sit safely between `<` `>`.
    case invalidContact
    case invalidIdentityURI
    case invalidLabelHeaderName
    /// A name that is not a token, or a value with control characters; carries the name.
    case invalidHeaderField(String)
    /// Proxying: the top Via cannot carry the request's real source (`proxyViaProblem`).
    case unroutableVia
}

extension SIPRequest {
    /// Writes a complete response into `buffer`.
    ///
    /// Copied from the request (RFC 3261 §8.2.6.2): every Via value in order (the top one with
    /// RFC 3581 `received`/`rport`), From, To (plus a derived tag if it had none), Call-ID and
    /// CSeq, as written (folded lines unfolded). Then Contact, P-Asserted-Identity, the label
    /// header, the extra headers, and `Content-Length: 0`.
    ///
    /// The same request (a retransmission) always yields the same bytes. 16 KiB is enough for
    /// any realistic request; 2 × `maxMessageSize` plus the label and extra headers is enough for
    /// any request at all.
    public func writeResponse(_ response: SIPResponse, into buffer: UnsafeMutableRawBufferPointer) throws(SIPWriteError) -> SIPWriteResult {
        let s = store
        guard s.state != .empty else { throw .noRequest }
        guard (100...699).contains(response.statusCode) else { throw .invalidStatusCode }
        guard valid(response.reasonPhrase, known: &s.validReasonPhrase, isSafeHeaderValue) else { throw .invalidReasonPhrase }
        guard valid(response.source.ip, known: &s.validSourceIP, isIPAddressText) else { throw .invalidSourceAddress }
        guard valid(response.labelHeaderName, known: &s.validLabelHeaderName, isTokenString) else { throw .invalidLabelHeaderName }
        for h in response.headers where !isTokenString(h.name) || !isSafeHeaderValue(h.value) {
            throw .invalidHeaderField(h.name)
        }
        switch response.contact {
        // A complete parse has already refused a Request-URI that is not safe here.
        case .requestURI: guard s.state == .request || isSafeURI(s.requestURIText) else { throw .invalidContact }
        case .uri(let text): guard isSafeURI(text), !text.utf8.contains(UInt8(ascii: "?")) || !response.marksContact else { throw .invalidContact }
        case .requestUser(let scheme, let host):
            guard isTokenString(scheme), isSafeURI(scheme + ":" + host), !host.utf8.contains(UInt8(ascii: "?")),
                  (s.requestURI.rawUser ?? .empty).allSatisfy(isSafeURIByte) else { throw .invalidContact }
        case nil: break
        }
        if case .uri(let text) = response.identity, !isSafeURI(text) { throw .invalidIdentityURI }
        // Derived text for this write goes to the arena and is released afterwards.
        let mark = s.arena.used
        defer { s.arena.used = mark }

        var w = ByteWriter(buffer)
        w.append("SIP/2.0 ")
        w.appendDecimal(response.statusCode)
        w.append(" ")
        w.appendString(response.reasonPhrase)
        w.append("\r\n")

        for (index, value) in s.viaValues.enumerated() {
            w.append("Via: ")
            if index == 0 {
                writeTopVia(value, source: response.source, into: &w)
            } else {
                w.append(value)
            }
            w.append("\r\n")
        }

        let fromValue = s.from.value ?? .empty
        let toValue = s.to.value ?? .empty
        w.append("From: ")
        w.append(fromValue)
        w.append("\r\nTo: ")
        w.append(toValue)
        // After a complete parse the header values are already read; a 400 for a malformed
        // request reads them here, tolerating failure.
        let complete = s.state == .request
        let toTag = complete ? s.toAddress.tag : SIPNameAddress.read(toValue, arena: &s.arena)?.tag
        if toTag == nil {
            w.append(";tag=")
            w.appendHex(derivedToTag())
        }
        w.append("\r\nCall-ID: ")
        w.append(s.callID.value ?? .empty)
        w.append("\r\nCSeq: ")
        w.append(s.cseq.value ?? .empty)
        w.append("\r\n")

        switch response.contact {
        case nil:
            break
        case .requestURI:
            w.append("Contact: <")
            let uri = s.requestURI
            let headers = uri.headers.count > 0 && response.marksContact ? uri.headers : nil
            // The mark is a URI parameter: it goes before any `?headers`.
            w.append(headers.map { s.requestURIText.slice(0, $0.baseAddress! - s.requestURIText.baseAddress! - 1) } ?? s.requestURIText)
            if response.marksContact { appendMark(user: (uri.rawUser ?? .empty).bytes, into: &w) }
            if let headers {
                w.append("?")
                w.append(headers)
            }
            w.append(">\r\n")
        case .uri(let text):
            w.append("Contact: <")
            w.appendString(text)
            if response.marksContact { RedirectMark.user(ofURI: text) { appendMark(user: $0, into: &w) } }
            w.append(">\r\n")
        case .requestUser(let scheme, let host):
            w.append("Contact: <")
            w.appendString(scheme)
            w.append(":")
            let user = s.requestURI.rawUser ?? .empty
            if user.count > 0 {
                w.append(user)
                w.append("@")
            }
            w.appendString(host)
            if response.marksContact { appendMark(user: user.bytes, into: &w) }
            w.append(">\r\n")
        }

        // The identity URI: the caller's own text must be safe between < and >; text taken from
        // the request is checked too and, if unsafe, leads to omitting the header.
        var identityText: SIPText?
        var identityString: String?
        var identityOmitted = false
        switch response.identity {
        case nil:
            break
        case .from, .assertedIdentity, .remotePartyID, .preferredIdentity:
            if s.state == .request { identityText = s.identityAddress(response.identity!)?.uri.text }
        case .uri(let text):
            identityString = text
        }
        if let t = identityText, !isSafeURI(t) { identityText = nil }
        if response.identity != nil && identityText == nil && identityString == nil { identityOmitted = true }

        // The label is validated once, then used for both headers or for neither.
        let labelRefusal: SIPLabelRefusal?
        switch response.label {
        case nil:
            labelRefusal = writeIdentityAndLabel(nil, identityText, identityString, response, into: &w)
        case .buffer(let b):
            labelRefusal = writeIdentityAndLabel(b, identityText, identityString, response, into: &w)
        case .bytes(let b):
            labelRefusal = b.withUnsafeBytes { writeIdentityAndLabel($0, identityText, identityString, response, into: &w) }
        case .string(var text):
            labelRefusal = text.withUTF8 {
                writeIdentityAndLabel(UnsafeRawBufferPointer($0), identityText, identityString, response, into: &w)
            }
        }

        for h in response.headers {
            w.appendString(h.name)
            w.append(": ")
            w.appendString(h.value)
            w.append("\r\n")
        }
        w.append("Content-Length: 0\r\n\r\n")
        guard !w.overflowed else { throw .bufferTooSmall }
        return SIPWriteResult(byteCount: w.count, labelRefusal: labelRefusal, identityOmitted: identityOmitted)
    }

    /// `check(text)`, remembered in `known` for the next response: equal to the text last
    /// found valid, it is valid.
    @inline(__always)
    private func valid(_ text: String, known: inout String?, _ check: (String) -> Bool) -> Bool {
        if let known, known == text { return true }
        guard check(text) else { return false }
        known = text
        return true
    }

    private func appendMark(user: UnsafeRawBufferPointer, into w: inout ByteWriter) {
        w.append(";")
        w.append(RedirectMark.name)
        w.append("=")
        w.appendHex(RedirectMark.value(key: store.toTagKey, user: user))
    }

    /// `P-Asserted-Identity` (when there is an identity) and the label header (when the label is
    /// usable). Returns why a supplied label was left out.
    private func writeIdentityAndLabel(_ label: UnsafeRawBufferPointer?, _ identityText: SIPText?, _ identityString: String?,
                                       _ response: SIPResponse, into w: inout ByteWriter) -> SIPLabelRefusal? {
        let labelHeaderName = response.labelHeaderName
        let refusal = label.flatMap(validateLabel)
        let usable = refusal == nil ? label : nil
        if identityText != nil || identityString != nil {
            w.append("P-Asserted-Identity: ")
            if let usable, response.labelInIdentity {
                w.appendQuoted(usable, plain: response.plainQuotedStrings)
                w.append(" ")
            }
            w.append("<")
            if let t = identityText { w.append(t) } else if let c = identityString { w.appendString(c) }
            w.append(">\r\n")
        }
        if let usable {
            w.appendString(labelHeaderName)
            w.append(": ")
            w.appendQuoted(usable, plain: response.plainQuotedStrings)
            w.append("\r\n")
        }
        return refusal
    }

    /// Top Via with RFC 3581 handling: `rport` (with or without a value) becomes
    /// `rport=<source port>`; an existing `received` is dropped and `received=<source IP>` is
    /// appended when rport was requested or the sent-by host is not the source IP (RFC 3261
    /// §18.2.1). A Via lookupd cannot read (only possible in a 400) is copied as it is.
    private func writeTopVia(_ value: SIPText, source: SIPSourceAddress, into w: inout ByteWriter) {
        guard let via = store.state == .request ? store.topVia : SIPVia.read(value) else {
            w.append(value)
            return
        }
        writeVia(via, of: value, source: source, addRport: false, into: &w)
    }

    /// A To-tag that depends only on the request's transaction identity (Call-ID, From tag, CSeq,
    /// top Via branch) and the parser's key, so a retransmission is answered byte-identically
    /// without keeping state.
    private func derivedToTag() -> UInt64 {
        let s = store
        var h = FNV1a(key: s.toTagKey)
        h.add(s.callID.value ?? .empty)
        let complete = s.state == .request
        let fromTag = complete ? s.fromAddress.tag : SIPNameAddress.read(s.from.value ?? .empty, arena: &s.arena)?.tag
        h.add(fromTag ?? .empty)
        h.add(s.cseq.value ?? .empty)
        if let top = s.viaValues.first {
            let via = complete ? s.topVia : SIPVia.read(top)
            h.add(via?.branch ?? top)
        }
        return h.finish()
    }
}

func validateLabel(_ bytes: UnsafeRawBufferPointer) -> SIPLabelRefusal? {
    // The directory's own rules (TextRules.LabelRules), so a header never carries what a
    // directory would refuse, whatever the label's way in (a journal, a contact list).
    switch LabelRules.check(bytes, maxBytes: SIPResponse.maxLabelBytes) {
    case nil: return nil
    case .empty: return .empty
    case .tooLong: return .tooLong
    case .invalidUTF8: return .invalidUTF8
    case .controlCharacter, .lineSeparator, .bidiControl: return .controlCharacter
    }
}

/// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
@inline(__always)
func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool { UTF8Rules.isValid(bytes) }

/// No control characters except HTAB (RFC 3261 header values and reason phrases; this is what
/// keeps CR LF out).
private func allUTF8(_ s: String, _ predicate: (UInt8) -> Bool) -> Bool {
    var s = s
    return s.withUTF8 { bytes in
        for b in bytes where !predicate(b) { return false }
        return true
    }
}

func isSafeHeaderValue(_ s: String) -> Bool {
    allUTF8(s) { !isControl($0) || $0 == ASCII.tab }
}

func isTokenString(_ s: String) -> Bool {
    !s.isEmpty && allUTF8(s, isTokenByte)
}

func isIPAddressText(_ s: String) -> Bool {
    guard !s.isEmpty, s.utf8.count <= 45 else { return false }
    return allUTF8(s) { TextInput.hexValue($0) != nil || $0 == UInt8(ascii: ".") || $0 == ASCII.colon }
}

func isSafeURIByte(_ b: UInt8) -> Bool {
    b > 0x20 && b < 0x7F && b != ASCII.lessThan && b != ASCII.greaterThan && b != ASCII.quote
}

/// A URI that can sit between `<` and `>` without changing the header's structure.
func isSafeURI(_ t: SIPText) -> Bool {
    guard t.count > 0, t.firstIndex(of: ASCII.colon) != nil else { return false }
    return t.allSatisfy(isSafeURIByte)
}

func isSafeURI(_ s: String) -> Bool {
    guard !s.isEmpty, s.utf8.contains(ASCII.colon) else { return false }
    return allUTF8(s, isSafeURIByte)
}

/// The Via `via` (read from `value`) with RFC 3581 handling: `rport` (with or without a
/// value) becomes `rport=<source port>`, also added when `addRport`; an existing `received`
/// is dropped and `received=<source IP>` appended when rport is there or the sent-by host is
/// not the source IP (RFC 3261 §18.2.1). Shared by responses and the proxy's forwarding.
func writeVia(_ via: SIPVia, of value: SIPText, source: SIPSourceAddress, addRport: Bool, alwaysReceived: Bool = false,
              into w: inout ByteWriter) {
    let params = via.parameters.text
    let headLength = params.count > 0 ? (params.baseAddress! - value.baseAddress!) : value.count
    w.append(value.slice(0, headLength).trimmingLWS())
    var rport = false
    if case .known(let item) = via.notedRport {
        // Plain parameters without `received`: each would be written back as it is, so the
        // text is copied around the one `rport` item.
        if let item {
            // `;rport` as written (its name's case kept, as the loop keeps it), then the port.
            w.append(params.slice(0, item.lowerBound + 6))
            w.append("=")
            w.appendDecimal(Int(source.port))
            w.append(params.slice(item.upperBound, params.count))
            rport = true
        } else {
            w.append(params)
        }
    } else {
        for p in via.parameters {
            if p.name.equalsLiteral("received") { continue }
            w.append(";")
            w.append(p.name)
            if p.name.equalsLiteral("rport") {
                rport = true
                w.append("=")
                w.appendDecimal(Int(source.port))
                continue
            }
            if let v = p.value {
                w.append("=")
                w.append(v)
            }
        }
    }
    if addRport && !rport {
        w.append(";rport=")
        w.appendDecimal(Int(source.port))
        rport = true
    }
    if alwaysReceived || rport || !via.host.equalsIgnoringCase(source.ip) {
        w.append(";received=")
        w.appendString(source.ip)
    }
}
