import TextRules

// Stateless proxying (RFC 3261 §16.11) by splicing the received bytes. libosip2's serializer
// reorders headers, re-cases unknown header names and may touch values, so nothing forwarded is
// ever re-serialised: header lines are copied as received (line ends normalised to CRLF), only
// the lines the proxy must change are rewritten, and the body is copied byte for byte.

/// One piece of the display name a labelled call is forwarded with.
///
/// Threading: a plain value; `Sendable`.
public enum SIPDisplayNamePart: Sendable, Hashable {
    case text(String)
    /// The label lookupd found.
    case label
    /// The caller's own display name (unquoted), empty when there is none.
    case originalName
    /// The attribution of the caller's number (region and carrier), empty when unknown.
    case attribution
}

/// The Via a proxy pushes: `SIP/2.0/<transport> <host>:<port>;branch=...`.
///
/// Threading: a plain value; `Sendable`.
public struct SIPViaAddress: Sendable, Hashable {
    /// `UDP` or `TCP`.
    public var transport: String
    /// An IP address (IPv6 without brackets).
    public var host: String
    public var port: UInt16

    public init(transport: String, host: String, port: UInt16) {
        self.transport = transport
        self.host = host
        self.port = port
    }
}

/// How to forward the current request.
///
/// Threading: not `Sendable` because of `SIPLabel.buffer`; build it on the thread that writes.
public struct SIPForwarding {
    /// Our Via, pushed on top.
    public var via: SIPViaAddress
    /// Mixed into the branch, so branches cannot be predicted from outside; the same in every
    /// worker (a CANCEL may reach another worker than its INVITE).
    public var branchKey: UInt64
    /// The socket peer the request came from: `received`/`rport` on the (now second) Via,
    /// always both, whatever the Via says (RFC 3261 §18.2.1, RFC 3581): responses are routed
    /// by them alone, so they can only ever reach where the request came from.
    public var source: SIPSourceAddress
    /// Our own addresses: a top Route naming one of them is removed (§16.4).
    public var ownAddresses: [SIPViaAddress]
    /// The label to show; nil forwards the request untouched but for the proxy's own headers.
    public var label: SIPLabel?
    public var displayName: [SIPDisplayNamePart]
    /// What `.attribution` in `displayName` stands for.
    public var attribution: SIPLabel?
    public var labelHeaderName: String
    public var labelInAssertedIdentity: Bool
    /// `"` and `\` in the names written as `'` and `/` instead of escaped (`label-escapes`).
    public var plainQuotedStrings = false
    /// `label-to-caller = no`: the From is relabelled for the PBX only; its original lines
    /// travel in lookupd's Via (CallerFrom.swift) and `relayResponse` puts them back in every
    /// response. nil (`yes`): responses keep the From the PBX copied.
    public var callerFromKey: SIPCallerFromKey?
    /// The Request-URI to forward to instead of the request's own (a blocked call's
    /// `block-treatment = redirect` toward the upstream); the same rules as `SIPContact.uri`.
    public var requestURI: String?

    public init(via: SIPViaAddress, branchKey: UInt64, source: SIPSourceAddress,
                ownAddresses: [SIPViaAddress] = [], label: SIPLabel? = nil, displayName: [SIPDisplayNamePart] = [.label],
                labelHeaderName: String = "X-Caller-Label", labelInAssertedIdentity: Bool = false) {
        self.via = via
        self.branchKey = branchKey
        self.source = source
        self.ownAddresses = ownAddresses
        self.label = label
        self.displayName = displayName
        self.labelHeaderName = labelHeaderName
        self.labelInAssertedIdentity = labelInAssertedIdentity
    }
}

/// What `writeForwarded` did.
///
/// Threading: a plain value; `Sendable`.
public struct SIPForwardResult: Sendable, Hashable {
    public var byteCount: Int
    /// The branch of the Via pushed.
    public var branch: String
    /// Set when a label was given but could not be written (the request went on without it).
    public var labelRefusal: SIPLabelRefusal?
    /// The From was left as it was although it had a label: its lines were too long to carry
    /// back to the caller (`maxCarriedFromBytes`); the label went in the label header only.
    public var fromKept = false
}

/// Prefix of every branch lookupd writes (RFC 3261 magic cookie first). Probes add `p`.
let proxyBranchPrefix: StaticString = "z9hG4bK-lkd"
/// Prefix, loop hash (8 hex), request hash (16 hex), response tag (8 hex).
let proxyBranchLength = 11 + 8 + 16 + 8

extension SIPRequest {
    /// §16.3 step 4: true when a Via holds a branch lookupd wrote on one of `hosts` for this
    /// very request (same Request-URI, Call-ID, From tag, CSeq number and Route set): the
    /// request came back, it did not spiral.
    public func hasLooped(key: UInt64, hosts: [String]) -> Bool {
        guard isComplete else { return false }
        let loop = hex32(loopHash(key: key))
        for value in store.viaValues {
            guard let via = SIPVia.read(value), let branch = via.branch, hosts.contains(where: { via.host.equalsIgnoringCase($0) }) else { continue }
            let b = branch.bytes
            let prefix = proxyBranchPrefix.utf8CodeUnitCount
            guard b.count >= prefix + 8, memcmpEqual(UnsafeRawBufferPointer(rebasing: b[0..<prefix]),
                                                     UnsafeRawBufferPointer(start: proxyBranchPrefix.utf8Start, count: prefix)) else { continue }
            if loop.utf8.elementsEqual(b[prefix..<(prefix + 8)]) { return true }
        }
        return false
    }

    /// Fields that name the request wherever it is (no Via): what a loop keeps.
    private func loopHash(key: UInt64) -> UInt32 {
        let s = store
        var h = FNV1a(key: key ^ 0x6c6f6f70)
        h.add(s.requestURIText)
        h.add(s.callID.value ?? .empty)
        h.add(s.fromAddress.tag ?? .empty)
        h.add(number: s.cseqNumber)
        return UInt32(truncatingIfNeeded: h.finish())
    }

    /// §16.11: the branch must be the same for a retransmission and differ between
    /// transactions, without state. The incoming top Via's branch names the client transaction;
    /// Call-ID, From tag, CSeq number and Request-URI guard against clients reusing branches.
    /// The CSeq method and the To tag stay out: a CANCEL and the ACK of a non-2xx answer carry
    /// the INVITE's branch to the next hop (§9.1, §17.1.1.3), so they must map to it here too.
    func forwardBranch(key: UInt64) -> String {
        let s = store
        var h = FNV1a(key: key)
        h.add(s.topVia.branch ?? s.viaValues.first ?? .empty)
        h.add(s.requestURIText)
        h.add(s.callID.value ?? .empty)
        h.add(s.fromAddress.tag ?? .empty)
        h.add(number: s.cseqNumber)
        var branch = proxyBranchPrefix.description
        branch += hex32(loopHash(key: key))
        branch += hex64(h.finish())
        branch += hex32(responseTag(key: key, callID: s.callID.value ?? .empty, fromTag: s.fromAddress.tag ?? .empty,
                                    cseq: s.cseqNumber, clientBranch: s.topVia.branch ?? .empty))
        return branch
    }

    /// Why the top Via cannot carry the real source (`received`/`rport`) to the next hop and
    /// back: a proxy that forwarded it anyway would let the caller decide where the upstream's
    /// responses go. Nil when it can. `transport` is the one the request came over.
    public func proxyViaProblem(transport: String) -> String? {
        guard isComplete, let value = store.viaValues.first else { return "no Via" }
        guard let via = SIPVia.read(value) else { return "unreadable top Via" }
        guard via.protocolName.equalsLiteral("SIP"), via.protocolVersion.equalsLiteral("2.0") else { return "top Via is not SIP/2.0" }
        guard via.transport.equalsIgnoringCase(transport) else { return "top Via transport is not the one the request came over" }
        guard via.host.count > 0 else { return "top Via has no host" }
        // An empty value (`branch=`, `x=`) is not a gen-value (§25.1): parameters written
        // after one would be lost to the next parser.
        for p in via.parameters where p.name.count == 0 || !p.name.isToken || !(p.value.map(isGenericValue) ?? true) {
            return "top Via has an empty or invalid parameter"
        }
        return nil
    }

    /// Writes the request as it is to be forwarded (RFC 3261 §16.6 steps 3-8 for a stateless
    /// proxy): our Via on top; `received`/`rport` on the previous top Via (§18.2.1, RFC 3581);
    /// Max-Forwards decremented (70 added when absent, §16.6 step 3); a top Route naming us removed (§16.4);
    /// any label header the request brought removed (only lookupd may assert a label); with a
    /// label, the From display name replaced, the label header added and optionally the
    /// P-Asserted-Identity display names replaced. Every other line is copied as received,
    /// unfolded lines unchanged, the body byte for byte; Content-Length is added if absent.
    public func writeForwarded(_ f: SIPForwarding, into buffer: UnsafeMutableRawBufferPointer) throws(SIPWriteError) -> SIPForwardResult {
        let s = store
        guard s.state == .request else { throw .noRequest }
        guard isIPAddressText(f.via.host), isTokenString(f.via.transport) else { throw .invalidSourceAddress }
        guard isIPAddressText(f.source.ip) else { throw .invalidSourceAddress }
        // The transport is the Answerer's to check; here only that the Via can carry the source.
        guard proxyViaProblem(transport: s.topVia.transport.string) == nil else { throw .unroutableVia }
        guard isTokenString(f.labelHeaderName) else { throw .invalidLabelHeaderName }
        if let uri = f.requestURI, !isSafeURI(uri) { throw .invalidContact }
        let mark = s.arena.used
        defer { s.arena.used = mark }

        // The label and the display name built from it, validated before anything is written.
        var labelBytes: [UInt8]? = nil
        var labelRefusal: SIPLabelRefusal? = nil
        switch f.label {
        case nil: break
        case .string(let text): labelBytes = Array(text.utf8)
        case .bytes(let b): labelBytes = b
        case .buffer(let b): labelBytes = Array(b)
        }
        if let l = labelBytes {
            labelRefusal = l.withUnsafeBytes { validateLabel($0) }
            if labelRefusal != nil { labelBytes = nil }
        }
        var attributionBytes: [UInt8] = []
        switch f.attribution {
        case nil: break
        case .string(let text): attributionBytes = Array(text.utf8)
        case .bytes(let b): attributionBytes = b
        case .buffer(let b): attributionBytes = Array(b)
        }
        var displayName: [UInt8]? = nil
        if let l = labelBytes {
            var name: [UInt8] = []
            for part in f.displayName {
                switch part {
                case .text(let t): name += Array(t.utf8)
                case .label: name += l
                case .originalName: if let d = s.fromAddress.displayName { name += Array(d.bytes) }
                case .attribution: name += attributionBytes
                }
            }
            while let last = name.last, last == ASCII.space { name.removeLast() }
            while let first = name.first, first == ASCII.space { name.removeFirst() }
            // A caller's own name that cannot be written safely (control characters, invalid
            // UTF-8) is not worth losing the call's label over: fall back to the label alone.
            let ok = name.withUnsafeBytes { validateDisplayName($0) }
            displayName = ok ? name : l
        }

        var w = ByteWriter(buffer)
        let raw = SIPText(baseAddress: s.raw, count: s.bodyStart)
        let firstLF = raw.firstIndex(of: ASCII.lf) ?? raw.count
        if let uri = f.requestURI {
            w.append(s.methodText)
            w.append(" ")
            w.appendString(uri)
            w.append(" ")
            w.append(s.versionText)
        } else {
            w.append(trimCR(raw.slice(0, firstLF)))
        }
        w.append("\r\n")

        let branch = forwardBranch(key: f.branchKey)
        // The From lines to carry in our Via (label-to-caller = no), found before the Via is
        // written; a From too long to carry is not relabelled at all.
        var carried: SIPText? = nil
        var fromKept = false
        if displayName != nil, f.callerFromKey != nil, let from = s.from.value, canRename(from) {
            forEachHeader(in: raw, from: firstLF + 1) { name, lines, _ in
                if carried == nil, HeaderKind(name: name) == .from { carried = trimLineEnds(lines) }
            }
            if let c = carried, c.count > maxCarriedFromBytes {
                carried = nil
                fromKept = true
            }
        }
        var wroteVia = false, sawMaxForwards = false, sawContentLength = false, sawRoute = false
        forEachHeader(in: raw, from: firstLF + 1) { name, lines, folded in
            let kind = HeaderKind(name: name)
            func value() -> SIPText {
                let v = headerValue(lines)
                return (folded ? s.arena.unfolded(v) : v).trimmingLWS()
            }
            func copy() { w.appendHeaderLines(trimLineEnds(lines), folded: folded); w.append("\r\n") }
            switch kind {
            case .via where !wroteVia:
                // An empty Via line before the first real one (found by the proxy-path fuzzer)
                // carries nothing: dropped, and ours goes before the line holding the top Via,
                // whose first value gets received/rport.
                let items = value()
                var holdsOne = false
                forEachItem(items, separators: ASCII.comma, ASCII.comma) { _ in holdsOne = true }
                guard holdsOne else { return }
                wroteVia = true
                w.append("Via: SIP/2.0/")
                w.appendString(f.via.transport)
                w.append(" ")
                appendHost(f.via.host, into: &w)
                w.append(":")
                w.appendDecimal(Int(f.via.port))
                w.append(";branch=")
                w.appendString(branch)
                if let carried, let key = f.callerFromKey { w.appendCallerFrom(carried, branch: branch, key: key) }
                w.append("\r\nVia: ")
                var first = true
                forEachItem(items, separators: ASCII.comma, ASCII.comma) { item in
                    if first {
                        writeReceivedVia(item, source: f.source, into: &w)
                        first = false
                    } else {
                        w.append(", ")
                        w.append(item)
                    }
                }
                w.append("\r\n")
            case .maxForwards:
                sawMaxForwards = true
                w.append("Max-Forwards: ")
                w.appendDecimal(max(0, (s.maxForwardsValue ?? 70) - 1))
                w.append("\r\n")
            case .contentLength:
                sawContentLength = true
                copy()
            case .from where displayName != nil && !fromKept:
                let from = value()
                guard canRename(from) else { return copy() }
                w.append("From: ")
                writeNameAddress(from, displayName: displayName!, plain: f.plainQuotedStrings, into: &w)
                w.append("\r\n")
            case .pAssertedIdentity where displayName != nil && f.labelInAssertedIdentity:
                w.append("P-Asserted-Identity: ")
                writeAssertedIdentities(value(), displayName: labelBytes!, plain: f.plainQuotedStrings, into: &w)
                w.append("\r\n")
            default:
                if name.equalsIgnoringCase(f.labelHeaderName) { return }
                if !sawRoute, name.equalsLiteral("route") {
                    sawRoute = true
                    var kept: [SIPText] = []
                    var index = 0
                    forEachRouteItem(value()) { item in
                        if index > 0 || !routeNamesUs(item, f.ownAddresses) { kept.append(item) }
                        index += 1
                    }
                    if kept.isEmpty { return }
                    w.append("Route: ")
                    for (i, item) in kept.enumerated() {
                        if i > 0 { w.append(", ") }
                        w.append(item)
                    }
                    w.append("\r\n")
                    return
                }
                copy()
            }
        }
        if !sawMaxForwards { w.append("Max-Forwards: 70\r\n") }
        if let l = labelBytes {
            w.appendString(f.labelHeaderName)
            w.append(": ")
            l.withUnsafeBytes { w.appendQuoted($0, plain: f.plainQuotedStrings) }
            w.append("\r\n")
        }
        if !sawContentLength {
            w.append("Content-Length: ")
            w.appendDecimal(s.bodyLength)
            w.append("\r\n")
        }
        w.append("\r\n")
        w.append(s.raw + s.bodyStart, s.bodyLength)
        guard !w.overflowed else { throw .bufferTooSmall }
        return SIPForwardResult(byteCount: w.count, branch: branch, labelRefusal: labelRefusal, fromKept: fromKept)
    }

    /// The top Via value with `received` and `rport` set from the socket peer, always, replacing
    /// any the caller wrote. `proxyViaProblem` has passed.
    private func writeReceivedVia(_ value: SIPText, source: SIPSourceAddress, into w: inout ByteWriter) {
        guard let via = SIPVia.read(value) else { return w.append(value) }
        writeVia(via, of: value, source: source, addRport: true, alwaysReceived: true, into: &w)
    }
}

/// RFC 3261 §25.1 gen-value: a token, a host (an IPv6 reference in brackets) or a complete
/// quoted-string. Anything else (an unterminated quote, found by the proxy-path fuzzer) would
/// swallow the parameters written after it.
private func isGenericValue(_ v: SIPText) -> Bool {
    guard v.count > 0 else { return false }
    if v[0] == ASCII.quote {
        var i = 1
        while i < v.count {
            if v[i] == ASCII.backslash { i += 2; continue }
            if v[i] == ASCII.quote { return i == v.count - 1 }
            if isControl(v[i]) && v[i] != ASCII.tab { return false }
            i += 1
        }
        return false
    }
    for b in v where !isTokenByte(b) && b != ASCII.colon && b != ASCII.leftBracket && b != ASCII.rightBracket { return false }
    return true
}

/// Whether `writeNameAddress` can give `value` a display name: a name-addr always; an
/// addr-spec only when its URI can sit between `<` `>` unchanged (a lenient parser may have
/// let through one holding `>` or a space, which the brackets would break).
private func canRename(_ value: SIPText) -> Bool {
    if value.count > 0, value[0] == ASCII.quote { return true }
    if value.firstIndex(of: ASCII.lessThan) != nil { return true }
    var end = 0
    while end < value.count, value[end] != ASCII.semicolon, !isLWS(value[end]) { end += 1 }
    return isSafeURI(value.slice(0, end))
}

/// `"name" <URI>;params` from any name-addr or addr-spec form of `value` (From, §20.20);
/// `value` must pass `canRename`.
private func writeNameAddress(_ value: SIPText, displayName: [UInt8], plain: Bool, into w: inout ByteWriter) {
    displayName.withUnsafeBytes { w.appendQuoted($0, plain: plain) }
    w.append(" ")
    var rest = value
    if value.count > 0, value[0] == ASCII.quote {
        var i = 1
        while i < value.count, value[i] != ASCII.quote { i += value[i] == ASCII.backslash ? 2 : 1 }
        rest = value.slice(min(i + 1, value.count), value.count).trimmingLWS()
    } else if let lt = value.firstIndex(of: ASCII.lessThan) {
        rest = value.slice(lt, value.count)
    } else {
        // addr-spec: the URI ends at the first ';' or LWS (§20); parameters belong to the header.
        var end = 0
        while end < value.count, value[end] != ASCII.semicolon, !isLWS(value[end]) { end += 1 }
        w.append("<")
        w.append(value.slice(0, end))
        w.append(">")
        w.append(value.slice(end, value.count).trimmingLWS())
        return
    }
    w.append(rest)
}

/// Every value of a P-Asserted-Identity header, with the label as its display name.
private func writeAssertedIdentities(_ value: SIPText, displayName: [UInt8], plain: Bool, into w: inout ByteWriter) {
    var start = 0
    var first = true
    while start < value.count {
        let end = nextSeparator(in: value, from: start, separator: ASCII.comma, respectAngles: true)
        let item = value.slice(start, end).trimmingLWS()
        start = end + 1
        guard item.count > 0 else { continue }
        if !first { w.append(", ") }
        first = false
        if canRename(item) { writeNameAddress(item, displayName: displayName, plain: plain, into: &w) } else { w.append(item) }
    }
}

/// A display name the proxy may write: the label rules (a caller's own name with a bidi
/// override or a C1 control is not written), but up to 512 bytes (a template around it).
private func validateDisplayName(_ bytes: UnsafeRawBufferPointer) -> Bool {
    LabelRules.check(bytes, maxBytes: 512) == nil
}

/// A Route value naming one of our addresses (host and port, the port defaulting to 5060).
private func routeNamesUs(_ item: SIPText, _ own: [SIPViaAddress]) -> Bool {
    var text = item
    if let lt = item.firstIndex(of: ASCII.lessThan), let gt = item.firstIndex(of: ASCII.greaterThan, from: lt) {
        text = item.slice(lt + 1, gt)
    }
    var arena = Arena(capacity: text.count * 2 + 64)
    defer { arena.deallocate() }
    guard let uri = SIPURI.read(text, arena: &arena), uri.scheme == .sip || uri.scheme == .sips, var host = uri.host else { return false }
    if host.count >= 2, host[0] == ASCII.leftBracket { host = host.slice(1, host.count - 1) }
    let port = uri.port ?? 5060
    return own.contains { host.equalsIgnoringCase($0.host) && port == Int($0.port) }
}

/// Route values are name-addrs separated by commas outside `<>` and quotes.
private func forEachRouteItem(_ value: SIPText, _ body: (SIPText) -> Void) {
    var start = 0
    while start < value.count {
        let end = nextSeparator(in: value, from: start, separator: ASCII.comma, respectAngles: true)
        let item = value.slice(start, end).trimmingLWS()
        if item.count > 0 { body(item) }
        start = end + 1
    }
}

private func appendHost(_ host: String, into w: inout ByteWriter) {
    if host.contains(":") {
        w.append("[")
        w.appendString(host)
        w.append("]")
    } else {
        w.appendString(host)
    }
}

/// Walks the header fields of a header section (start line excluded) and hands each one over
/// with its name, its raw lines (continuations included, line ends included) and whether it
/// was folded. Stops at the empty line.
func forEachHeader(in raw: SIPText, from start: Int, _ body: (_ name: SIPText, _ lines: SIPText, _ folded: Bool) -> Void) {
    var pos = start
    var fieldStart = -1
    var fieldEnd = 0
    var folded = false
    var name = SIPText.empty
    func finish() {
        if fieldStart >= 0 { body(name, raw.slice(fieldStart, fieldEnd), folded) }
        fieldStart = -1
    }
    while pos < raw.count {
        let lf = raw.firstIndex(of: ASCII.lf, from: pos) ?? raw.count
        let line = trimCR(raw.slice(pos, lf))
        let next = min(lf + 1, raw.count)
        if line.count == 0 { break }
        if isWSP(line[0]) {
            if fieldStart >= 0 { fieldEnd = next; folded = true }
        } else {
            finish()
            if let colon = line.firstIndex(of: ASCII.colon) {
                var nameEnd = colon
                while nameEnd > 0, isWSP(line[nameEnd - 1]) { nameEnd -= 1 }
                name = line.slice(0, nameEnd)
                fieldStart = pos
                fieldEnd = next
                folded = false
            }
        }
        pos = next
    }
    finish()
}

/// The value part of a header field's raw lines (after the first ':').
func headerValue(_ lines: SIPText) -> SIPText {
    guard let colon = lines.firstIndex(of: ASCII.colon) else { return .empty }
    return trimLineEnds(lines.slice(colon + 1, lines.count))
}

extension ByteWriter {
    /// A header field's lines as received, every line end inside a folded one written CR LF
    /// (found by the proxy-path fuzzer: a bare LF inside a folded field was passed on).
    mutating func appendHeaderLines(_ lines: SIPText, folded: Bool) {
        guard folded else { return append(lines) }
        var start = 0
        for i in 0..<lines.count where lines[i] == ASCII.lf {
            let end = i > 0 && lines[i - 1] == ASCII.cr ? i - 1 : i
            append(lines.slice(start, end))
            append("\r\n")
            start = i + 1
        }
        append(lines.slice(start, lines.count))
    }
}

/// Removes one trailing CR.
func trimCR(_ t: SIPText) -> SIPText {
    t.count > 0 && t[t.count - 1] == ASCII.cr ? t.slice(0, t.count - 1) : t
}

/// Removes trailing CR/LF bytes (the field's last line end).
func trimLineEnds(_ t: SIPText) -> SIPText {
    var n = t.count
    while n > 0, t[n - 1] == ASCII.cr || t[n - 1] == ASCII.lf { n -= 1 }
    return t.slice(0, n)
}

func hex32(_ v: UInt32) -> String {
    let s = String(v, radix: 16)
    return String(repeating: "0", count: 8 - s.count) + s
}

func hex64(_ v: UInt64) -> String {
    let s = String(v, radix: 16)
    return String(repeating: "0", count: 16 - s.count) + s
}

/// The part of a branch that proves a response came back for a request lookupd forwarded:
/// a keyed hash of what a response carries unchanged (Call-ID, From tag, CSeq number and the
/// client's branch in the next Via), so `relayResponse` can check it without state.
func responseTag(key: UInt64, callID: SIPText, fromTag: SIPText, cseq: UInt32, clientBranch: SIPText) -> UInt32 {
    var h = FNV1a(key: key ^ 0x7265_7370_6f6e_7365)
    h.add(callID)
    h.add(fromTag)
    h.add(number: cseq)
    h.add(clientBranch)
    return UInt32(truncatingIfNeeded: h.finish())
}

extension FNV1a {
    /// A number, as four bytes (hashing needs a stable encoding, not its text).
    mutating func add(number n: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) {
            state ^= UInt64((n >> UInt32(shift)) & 0xff)
            state = state &* 0x0000_0100_0000_01b3
        }
    }
}

extension SIPRequest {
    /// An ACK for a final answer lookupd wrote itself (a block, a 503, a 482...): its To tag is
    /// the one the response writer derives for the INVITE (same Call-ID, From tag, CSeq number
    /// and top Via branch). A stateless proxy must absorb it rather than forward it to a PBX
    /// that never saw the INVITE. A CSeq written with odd spacing in the INVITE is not
    /// recognised; its ACK then reaches the PBX, which ignores an ACK matching nothing.
    public var isACKForLocalAnswer: Bool {
        let s = store
        guard isComplete, method == .ack, let tag = s.toAddress.tag, tag.count == 16 else { return false }
        var h = FNV1a(key: s.toTagKey)
        h.add(s.callID.value ?? .empty)
        h.add(s.fromAddress.tag ?? .empty)
        let cseq = Array("\(s.cseqNumber) INVITE".utf8)
        cseq.withUnsafeBytes { h.add(SIPText(baseAddress: $0.baseAddress, count: $0.count)) }
        if let top = s.viaValues.first { h.add(s.topVia.branch ?? top) }
        return hex64(h.finish()).utf8.elementsEqual(tag.bytes)
    }
}
