import CSIPLexer

/// Parses SIP datagrams (or framed stream messages) into a reusable current request.
///
/// Threading: one instance per worker thread; not `Sendable`. The current request and every
/// `SIPText` obtained from it are valid until the next `parse` on the same instance.
/// Instances on different threads may parse concurrently (libosip2 is initialised once, by
/// `SIPLibrary.initialize()`, which `init` calls).
public final class SIPParser {
    public let maxMessageSize: Int
    let store: MessageStore

    /// - Parameters:
    ///   - maxMessageSize: larger packets are refused as `.tooLarge` without being read.
    ///   - toTagKey: mixed into the To-tags the response writer derives. Use the same value in
    ///     every worker (a retransmission may reach another one) and across restarts if tags
    ///     must stay stable.
    public init(maxMessageSize: Int = 16384, toTagKey: UInt64 = 0) {
        precondition(maxMessageSize >= 64, "maxMessageSize too small for any SIP request")
        SIPLibrary.initialize()
        self.maxMessageSize = maxMessageSize
        store = MessageStore(maxMessageSize: maxMessageSize, toTagKey: toTagKey)
    }

    /// The current request: complete after `.request`; after `.malformed(_, canRespond: true)`
    /// only the parts a 400 needs (writing a response works, parsed fields may be empty).
    public var request: SIPRequest { SIPRequest(store: store) }

    /// Parses one message. See `SIPParseOutcome` for what each outcome asks of the caller.
    public func parse(_ bytes: UnsafeRawBufferPointer) -> SIPParseOutcome {
        let s = store
        s.reset()
        let n = bytes.count
        guard n > 0, let input = bytes.baseAddress else { return .garbage }
        guard n <= maxMessageSize else { return .tooLarge }

        // RFC 3261 §7.5: CRLFs before the start line are ignored; nothing but CRLFs is a
        // keep-alive (RFC 5626 §3.5.1).
        var lead = 0
        while lead < n {
            let b = input.load(fromByteOffset: lead, as: UInt8.self)
            guard b == ASCII.cr || b == ASCII.lf else { break }
            lead += 1
        }
        if lead == n { return .keepAlive }
        let length = n - lead
        s.leadingBytes = lead
        s.raw.copyMemory(from: input + lead, byteCount: length)
        let message = SIPText(baseAddress: s.raw, count: length)

        if length >= 4, message.slice(0, 4).equalsLiteral("SIP/") { return .response }

        // Start line. Anything that does not even look like `token SP ... SIP/...` is noise
        // (scanners, STUN, HTTP, truncated junk) and gets no answer.
        guard let firstLF = message.firstIndex(of: ASCII.lf) else { return .garbage }
        var lineEnd = firstLF
        if lineEnd > 0, message[lineEnd - 1] == ASCII.cr { lineEnd -= 1 }
        let line = message.slice(0, lineEnd)
        guard let sp1 = line.firstIndex(of: ASCII.space), sp1 > 0, line.slice(0, sp1).isToken,
              containsSIPSlash(line) else { return .garbage }
        s.methodText = line.slice(0, sp1)
        s.method = SIPMethod(s.methodText)

        var startLineError: SIPMalformation?
        if let sp2 = line.firstIndex(of: ASCII.space, from: sp1 + 1), sp2 > sp1 + 1,
           line.firstIndex(of: ASCII.space, from: sp2 + 1) == nil {
            s.requestURIText = line.slice(sp1 + 1, sp2)
            s.versionText = line.slice(sp2 + 1, line.count)
            if !isSIPVersion(s.versionText) || containsControl(s.requestURIText) {
                startLineError = .badRequestLine
            }
        } else {
            startLineError = .badRequestLine
        }

        let headerError = scanHeaders(message, from: firstLF + 1)

        // A 400 needs every header it must copy (RFC 3261 §8.2.6.2); ACK is never answered
        // (RFC 3261 §17.2.1), not even when broken.
        let answerable = !s.hasUnsafeBytes && !s.viaValues.isEmpty && s.from.isUsable
            && s.to.isUsable && s.callID.isUsable && s.cseq.isUsable && s.method != .ack
        if answerable { s.state = .answerable }
        func malformed(_ why: SIPMalformation) -> SIPParseOutcome { .malformed(why, canRespond: answerable) }

        if let e = startLineError { return malformed(e) }
        if let e = headerError { return malformed(e) }
        if s.viaValues.isEmpty { return malformed(.missingHeader(.via)) }
        if !s.from.isUsable { return malformed(.missingHeader(.from)) }
        if !s.to.isUsable { return malformed(.missingHeader(.to)) }
        if !s.callID.isUsable { return malformed(.missingHeader(.callID)) }
        if !s.cseq.isUsable { return malformed(.missingHeader(.cseq)) }
        if s.from.count > 1 { return malformed(.duplicateHeader(.from)) }
        if s.to.count > 1 { return malformed(.duplicateHeader(.to)) }
        if s.callID.count > 1 { return malformed(.duplicateHeader(.callID)) }
        if s.cseq.count > 1 { return malformed(.duplicateHeader(.cseq)) }
        if s.maxForwards.count > 1 { return malformed(.duplicateHeader(.maxForwards)) }
        if s.contentLengthConflict { return malformed(.badContentLength) }
        if s.contentLength.count > 1 { return malformed(.duplicateHeader(.contentLength)) }

        // Body framing (RFC 3261 §18.3): the body is Content-Length bytes after the empty line;
        // over a datagram a missing Content-Length means "the rest", fewer bytes than announced
        // is an error, and anything beyond is ignored.
        let available = length - s.bodyStart
        if let cl = s.contentLength.value {
            guard let value = cl.parseDecimal(limit: UInt64(Int32.max)) else { return malformed(.badContentLength) }
            guard Int(value) <= available else { return malformed(.truncatedBody) }
            s.bodyLength = Int(value)
        } else {
            s.bodyLength = available
        }

        guard let (number, method) = parseCSeq(s.cseq.value!) else { return malformed(.badCSeq) }
        s.cseqNumber = number
        s.cseqMethod = method
        if let mf = s.maxForwards.value {
            guard let value = mf.parseDecimal(limit: UInt64(Int32.max)) else { return malformed(.badMaxForwards) }
            s.maxForwardsValue = Int(value)
        }

        // Option tags end up in an Unsupported header of a 420, so they must be tokens.
        for value in s.requireValues where !allItemsAreTokens(value) { return malformed(.invalidHeader(.require)) }
        for value in s.proxyRequireValues where !allItemsAreTokens(value) { return malformed(.invalidHeader(.proxyRequire)) }

        // A plain sip:/sips: Request-URI is read and judged in one walk (PlainSyntax.swift; its
        // bytes are all safe ones); any other takes the steps below.
        if !readPlainSIPURI(s.requestURIText, into: &s.requestURI, arena: &s.arena) {
            guard let uri = SIPURI.read(s.requestURIText, arena: &s.arena) else { return malformed(.badRequestURI) }
            // A 302 copies the Request-URI into Contact. One holding bytes a URI may
            // not carry unescaped (<, >, ", non-ASCII) would get no answer at all
            // (the writer refuses it) and be miscounted: refuse it here, with a 400.
            guard isSafeURI(s.requestURIText) else { return malformed(.badRequestURI) }
            switch uri.scheme {
            case .sip, .sips:
                guard isPlainURI(s.requestURIText) || osipAccepts(uri: s.requestURIText) else { return malformed(.badRequestURI) }
            case .tel:
                guard (uri.rawUser?.count ?? 0) > 0 else { return malformed(.badRequestURI) }
            case .other:
                break // answered with 416 by the protocol checks
            }
            s.requestURI = uri
        }

        // libosip2 judges each header lookupd relies on. Headers lookupd does not use are not
        // judged at all: an element should not reject a request over a header it does not need
        // (RFC 4475 §3.1.2.12), and skipping osip_message_parse avoids its per-message cost.
        // The plain shapes (PlainSyntax.swift) are ones osip is known to accept; only other
        // values are handed to osip. A plain top Via, From and To are also read in that one walk
        // (`readPlain...`); the others are read after every check, as before.
        let plainTopVia = readPlainVia(s.viaValues[0], into: &s.topVia)
        for v in s.viaValues.dropFirst(plainTopVia ? 1 : 0) {
            guard isPlainVia(v) || osipAccepts(v, OsipBridge.acceptsVia) else { return malformed(.invalidHeader(.via)) }
        }
        let fromValue = s.from.value!, toValue = s.to.value!, callIDValue = s.callID.value!, cseqValue = s.cseq.value!
        let plainFrom = readPlainNameAddress(fromValue, into: &s.fromAddress, arena: &s.arena)
        if !plainFrom {
            guard isPlainNameAddress(fromValue) || osipAccepts(fromValue, OsipBridge.acceptsNameAddress) else { return malformed(.invalidHeader(.from)) }
        }
        let plainTo = readPlainNameAddress(toValue, into: &s.toAddress, arena: &s.arena)
        if !plainTo {
            guard isPlainNameAddress(toValue) || osipAccepts(toValue, OsipBridge.acceptsNameAddress) else { return malformed(.invalidHeader(.to)) }
        }
        guard isPlainCallID(callIDValue) || osipAccepts(callIDValue, OsipBridge.acceptsCallID) else { return malformed(.invalidHeader(.callID)) }
        guard isPlainCSeq(cseqValue) || osipAccepts(cseqValue, OsipBridge.acceptsCSeq) else { return malformed(.invalidHeader(.cseq)) }

        if !plainFrom {
            guard let fromAddress = SIPNameAddress.read(fromValue, arena: &s.arena) else { return malformed(.invalidHeader(.from)) }
            s.fromAddress = fromAddress
        }
        if !plainTo {
            guard let toAddress = SIPNameAddress.read(toValue, arena: &s.arena) else { return malformed(.invalidHeader(.to)) }
            s.toAddress = toAddress
        }
        if !plainTopVia {
            guard let topVia = SIPVia.read(s.viaValues[0]) else { return malformed(.invalidHeader(.via)) }
            s.topVia = topVia
        }

        s.invalidAssertedIdentityCount = readIdentities(s.assertedIdentityValues, into: &s.assertedIdentities)
        if !s.remotePartyIDValues.isEmpty { _ = readIdentities(s.remotePartyIDValues, into: &s.remotePartyIDs) }
        if !s.preferredIdentityValues.isEmpty { _ = readIdentities(s.preferredIdentityValues, into: &s.preferredIdentities) }
        for value in s.privacyValues {
            forEachItem(value, separators: ASCII.semicolon, ASCII.comma) { s.privacy.insert(SIPPrivacy(token: $0)) }
        }
        s.state = .request
        return .request
    }

    /// Convenience for callers holding an array (tests, tools).
    public func parse(_ bytes: [UInt8]) -> SIPParseOutcome {
        bytes.withUnsafeBytes { parse($0) }
    }

    // MARK: - Header section

    /// Walks the header lines once and records the headers lookupd needs. Returns the first
    /// structural error, after recording everything it could (a 400 needs the rest).
    ///
    /// The line structure (where each LF and each line's first ':' is, and whether a line holds
    /// a NUL or a stray CR) comes from one vectorised pass in C (`lookupd_sip_lines`); lines
    /// with such bytes get the byte-by-byte checks below, all others skip them.
    private func scanHeaders(_ message: SIPText, from start: Int) -> SIPMalformation? {
        let s = store
        var error: SIPMalformation?
        let base = message.baseAddress!
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        let end = message.count
        // The header being accumulated (continuation lines extend it).
        var headerStart = -1, valueStart = 0, valueEnd = 0
        var headerFolded = false
        var kind = HeaderKind.other

        func finishHeader() {
            guard headerStart >= 0 else { return }
            headerStart = -1
            // Headers lookupd does not read are not looked at any further (the arena cannot run
            // out: derived text is bounded by a small multiple of the message, see MessageStore).
            if kind == .other { return }
            var value = SIPText(baseAddress: base + valueStart, count: valueEnd - valueStart)
            if headerFolded { value = s.arena.unfolded(value) }
            value = value.trimmingLWS()
            switch kind {
            case .via:
                // Most Via header lines hold one via-parm: without a ',' the trimmed value is the
                // one item forEachItem would find.
                if let p = value.baseAddress, firstOf(ASCII.comma, ASCII.comma, in: p, from: 0, to: value.count) == value.count {
                    s.viaValues.append(value)
                } else {
                    forEachItem(value, separators: ASCII.comma, ASCII.comma) { s.viaValues.append($0) }
                }
            case .from: s.from.record(value)
            case .to: s.to.record(value)
            case .callID: s.callID.record(value)
            case .cseq: s.cseq.record(value)
            case .maxForwards: s.maxForwards.record(value)
            case .contentLength:
                if let first = s.contentLength.value, first != value { s.contentLengthConflict = true }
                s.contentLength.record(value)
            case .contentType: s.contentType.record(value)
            case .require: s.requireValues.append(value)
            case .proxyRequire: s.proxyRequireValues.append(value)
            case .privacy: s.privacyValues.append(value)
            case .pAssertedIdentity: s.assertedIdentityValues.append(value)
            case .remotePartyID: s.remotePartyIDValues.append(value)
            case .pPreferredIdentity: s.preferredIdentityValues.append(value)
            case .other: break
            }
        }

        var pos = start
        var terminated = false
        s.bodyStart = end
        let lines = s.lines
        scan: while pos < end {
            let found = lookupd_sip_lines(bytes, end, pos, lines, MessageStore.lineCapacity)
            for k in 0..<found {
                let entry = lines[k]
                let lf = Int(entry.lf)
                if lf == end {
                    // No LF after `pos`: the datagram stops inside a line (unless it ended right
                    // after the previous LF).
                    if pos < end { error = error ?? .unterminatedHeaderSection }
                    break scan
                }
                var contentEnd = lf
                if contentEnd > pos, bytes[contentEnd - 1] == ASCII.cr { contentEnd -= 1 }
                if contentEnd == pos {
                    finishHeader()
                    s.bodyStart = lf + 1
                    terminated = true
                    break scan
                }
                let line = SIPText(baseAddress: base + pos, count: contentEnd - pos)
                if entry.flags != 0 {
                    if line.firstIndex(of: ASCII.cr) != nil {
                        error = error ?? .invalidCharacter
                        s.hasUnsafeBytes = true
                    }
                    if let nul = line.firstIndex(of: ASCII.nul) {
                        // Only a quoted-pair may carry a NUL (RFC 3261 §25.1, RFC 4475 §3.1.1.2).
                        var i = nul
                        while i < line.count {
                            if line[i] == ASCII.nul && (i == 0 || line[i - 1] != ASCII.backslash) {
                                error = error ?? .invalidCharacter
                                s.hasUnsafeBytes = true
                            }
                            i = line.firstIndex(of: ASCII.nul, from: i + 1) ?? line.count
                        }
                    }
                }
                let first = bytes[pos]
                if first == ASCII.space || first == ASCII.tab {
                    if headerStart >= 0 {
                        valueEnd = contentEnd
                        headerFolded = true
                    } else {
                        error = error ?? .badHeaderLine
                    }
                } else {
                    finishHeader()
                    if entry.colon != LOOKUPD_SIP_NONE {
                        let colon = Int(entry.colon) - pos
                        var nameEnd = colon
                        while nameEnd > 0, isWSP(bytes[pos + nameEnd - 1]) { nameEnd -= 1 }
                        let name = line.slice(0, nameEnd)
                        // In a line without a stray CR, a name `HeaderKind(token:)` knows is a
                        // token (its letters match only letters, its '-' only '-' or CR): the
                        // byte-by-byte token check is left to the other names.
                        let known = entry.flags == 0 && nameEnd > 0 ? HeaderKind(token: name) : .other
                        if known != .other || name.isToken {
                            headerStart = pos
                            valueStart = pos + colon + 1
                            valueEnd = contentEnd
                            headerFolded = false
                            kind = entry.flags == 0 ? known : HeaderKind(token: name)
                        } else {
                            error = error ?? .badHeaderLine
                        }
                    } else {
                        error = error ?? .badHeaderLine
                    }
                }
                pos = lf + 1
            }
        }
        if !terminated {
            // Tolerated: a datagram ending right after the last header line, without the empty
            // line (a datagram's end is the message's end).
            finishHeader()
        }
        return error
    }

    // MARK: - Values

    /// The name-addr values of identity headers (P-Asserted-Identity, Remote-Party-ID,
    /// P-Preferred-Identity) across their fields, at most `maxAssertedIdentities`; returns how
    /// many were present but unreadable.
    private func readIdentities(_ values: [SIPText], into list: inout [SIPNameAddress]) -> Int {
        let s = store
        var invalid = 0
        for value in values {
            var start = 0
            while start < value.count {
                let end = nextSeparator(in: value, from: start, separator: ASCII.comma, respectAngles: true)
                let item = value.slice(start, end).trimmingLWS()
                start = end + 1
                guard item.count > 0 else { continue }
                // An identity osip cannot parse is ignored, not fatal: PAI is advisory and a
                // broken one must not cost the caller their call.
                // One walk for a plain value (PlainSyntax.swift), the check and the reading otherwise.
                guard list.count < MessageStore.maxAssertedIdentities else { invalid += 1; continue }
                var address = SIPNameAddress()
                if readPlainNameAddress(item, into: &address, arena: &s.arena) {
                    list.append(address)
                } else if isPlainNameAddress(item) || osipAccepts(item, OsipBridge.acceptsNameAddress),
                          let read = SIPNameAddress.read(item, arena: &s.arena) {
                    list.append(read)
                } else {
                    invalid += 1
                }
            }
        }
        return invalid
    }

    private func osipAccepts(_ text: SIPText, _ check: (UnsafePointer<CChar>) -> Bool) -> Bool {
        let s = store
        let mark = s.arena.used
        defer { s.arena.used = mark }
        guard let c = s.arena.cString(text) else { return false }
        return check(c)
    }

    private func osipAccepts(uri: SIPText) -> Bool {
        let s = store
        let mark = s.arena.used
        defer { s.arena.used = mark }
        guard let c = s.arena.cString(uri) else { return false }
        return OsipBridge.acceptsURI(c)
    }
}

/// `CSeq: 1*DIGIT LWS Method`, the number at most 2^32-1 (RFC 3261 §8.1.1.5).
func parseCSeq(_ value: SIPText) -> (UInt32, SIPText)? {
    var i = 0
    while i < value.count, isDigit(value[i]) { i += 1 }
    guard i > 0, let number = value.slice(0, i).parseDecimal(limit: UInt64(UInt32.max)) else { return nil }
    let afterNumber = i
    while i < value.count, isLWS(value[i]) { i += 1 }
    guard i > afterNumber else { return nil }
    let method = value.slice(i, value.count).trimmingLWS()
    guard method.isToken else { return nil }
    return (UInt32(number), method)
}

/// `SIP/1*DIGIT.1*DIGIT`, "SIP" case-insensitively (RFC 3261 §7.1).
func isSIPVersion(_ text: SIPText) -> Bool {
    guard text.count >= 7, text.slice(0, 4).equalsLiteral("SIP/") else { return false }
    let rest = text.slice(4, text.count)
    guard let dot = rest.firstIndex(of: UInt8(ascii: ".")), dot > 0, dot < rest.count - 1 else { return false }
    return rest.slice(0, dot).allSatisfy(isDigit) && rest.slice(dot + 1, rest.count).allSatisfy(isDigit)
}

private func containsSIPSlash(_ line: SIPText) -> Bool {
    var from = 3
    while let slash = line.firstIndex(of: ASCII.slash, from: from) {
        if line.slice(slash - 3, slash + 1).equalsLiteral("SIP/") { return true }
        from = slash + 1
    }
    return false
}

private func allItemsAreTokens(_ value: SIPText) -> Bool {
    var ok = true
    forEachItem(value, separators: ASCII.comma, ASCII.comma) { if !$0.isToken { ok = false } }
    return ok
}

/// Calls `body` with each non-empty, trimmed item of a list separated by either separator,
/// ignoring separators inside quoted strings.
func forEachItem(_ value: SIPText, separators a: UInt8, _ b: UInt8, _ body: (SIPText) -> Void) {
    var start = 0
    while start <= value.count {
        let endA = nextSeparator(in: value, from: start, separator: a, respectAngles: false)
        let end = a == b ? endA : min(endA, nextSeparator(in: value, from: start, separator: b, respectAngles: false))
        let item = value.slice(start, end).trimmingLWS()
        if item.count > 0 { body(item) }
        start = end + 1
    }
}
