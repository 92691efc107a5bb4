/// Where a response goes next: the address of the Via under ours (RFC 3261 §18.2.2 with
/// RFC 3581: `received` over the sent-by host, `rport` over the sent-by port).
///
/// Threading: a plain value; `Sendable`.
public struct SIPNextHop: Sendable, Hashable {
    /// The Via's transport as written, upper-cased (`UDP`, `TCP`, ...).
    public var transport: String
    /// The host text: `received`, else the sent-by host (IPv6 without brackets). May be a name,
    /// which a stateless proxy without a resolver cannot use.
    public var host: String
    public var port: UInt16
}

/// What to do with a response received by the proxy (§16.11).
///
/// Threading: a plain value; `Sendable`.
public enum SIPResponseRelay: Sendable, Hashable {
    /// Forward the `byteCount` bytes written (our Via removed) to `nextHop`.
    case forward(byteCount: Int, statusCode: Int, nextHop: SIPNextHop)
    /// The answer to a request lookupd sent itself (a probe): nothing to forward.
    case ownRequest(statusCode: Int)
    /// The top Via is not one lookupd wrote: §16.11 says discard it.
    case notOurs
    /// Our Via was the only one (and not a probe's), or the next one lacks the `received` and
    /// `rport` lookupd writes on every request it forwards: nowhere it may send it.
    case noNextVia
    /// Not a usable response (status line, Via or Content-Length broken, body shorter than
    /// announced, larger than the maximum size).
    case malformed
}

/// The branch prefix of lookupd's own probes (a `p` after the proxy prefix).
let probeBranchPrefix: StaticString = "z9hG4bK-lkdp"

extension SIPParser {
    /// Checks that the top Via of a response is one lookupd pushed (sent-by one of `ours`, a
    /// branch of lookupd's whose keyed tag matches the response's Call-ID, From tag, CSeq
    /// number and next Via branch), removes it and writes the rest unchanged (header lines
    /// copied, line ends normalised to CRLF, body byte for byte) into `out`. The next hop is
    /// the next Via's `received`/`rport`, which lookupd wrote from the request's real source.
    /// With `callerFromKey`, the caller's own From carried in our Via (`label-to-caller = no`)
    /// replaces the relabelled one the upstream copied; a carried From that does not verify
    /// makes the response not ours.
    public func relayResponse(_ bytes: UnsafeRawBufferPointer, ours: [SIPViaAddress], branchKey: UInt64,
                              callerFromKey: SIPCallerFromKey? = nil,
                              into out: UnsafeMutableRawBufferPointer) -> SIPResponseRelay {
        let s = store
        s.reset()
        guard let input = bytes.baseAddress, bytes.count > 0, bytes.count <= maxMessageSize else { return .malformed }
        var lead = 0
        while lead < bytes.count, bytes[lead] == ASCII.cr || bytes[lead] == ASCII.lf { lead += 1 }
        let length = bytes.count - lead
        guard length > 12 else { return .malformed }
        s.raw.copyMemory(from: input + lead, byteCount: length)
        let message = SIPText(baseAddress: s.raw, count: length)
        guard message.slice(0, 8).equalsLiteral("SIP/2.0 "), let firstLF = message.firstIndex(of: ASCII.lf) else { return .malformed }
        let statusLine = trimCR(message.slice(0, firstLF))
        guard statusLine.count >= 11, statusLine.count == 11 || statusLine[11] == ASCII.space,
              let code = statusLine.slice(8, 11).parseDecimal(limit: 699), code >= 100,
              !statusLine.contains(where: { isControl($0) && $0 != ASCII.tab }) else { return .malformed }

        // The header section ends at the first empty line.
        var pos = firstLF + 1
        var bodyStart = -1
        while pos < length {
            let lf = message.firstIndex(of: ASCII.lf, from: pos) ?? length
            if trimCR(message.slice(pos, lf)).count == 0 {
                bodyStart = min(lf + 1, length)
                break
            }
            pos = lf + 1
        }
        if bodyStart < 0 { bodyStart = length }
        let headers = message.slice(0, bodyStart)
        if headers.contains(ASCII.nul) { return .malformed }
        // A bare CR would pass on as a line break to the next hop's parser.
        var cr = headers.firstIndex(of: ASCII.cr)
        while let i = cr {
            if i + 1 >= headers.count || headers[i + 1] != ASCII.lf { return .malformed }
            cr = headers.firstIndex(of: ASCII.cr, from: i + 1)
        }

        // Via values in order, the Content-Length, and what the branch tag covers.
        var vias: [SIPText] = []
        var firstViaItems = 0
        /// Which Via header line holds the top Via (empty Via lines may come before it).
        var viaHeaders = 0
        var firstViaHeader = 0
        var contentLength: Int? = nil
        var broken = false
        var callID: SIPText? = nil, from: SIPText? = nil, cseq: SIPText? = nil
        forEachHeader(in: headers, from: firstLF + 1) { name, lines, folded in
            let kind = HeaderKind(name: name)
            guard kind == .via || kind == .contentLength || kind == .callID || kind == .from || kind == .cseq else { return }
            var value = headerValue(lines)
            if folded { value = s.arena.unfolded(value) }
            value = value.trimmingLWS()
            if kind == .callID || kind == .from || kind == .cseq {
                // One of each, as in the request the tag was computed for.
                switch kind {
                case .callID: if callID != nil { broken = true }; callID = value
                case .from: if from != nil { broken = true }; from = value
                default: if cseq != nil { broken = true }; cseq = value
                }
            } else if kind == .via {
                let before = vias.count
                viaHeaders += 1
                forEachItem(value, separators: ASCII.comma, ASCII.comma) { vias.append($0) }
                if before == 0 && !vias.isEmpty {
                    firstViaItems = vias.count
                    firstViaHeader = viaHeaders
                }
            } else {
                guard let n = value.parseDecimal(limit: UInt64(Int32.max)), contentLength == nil || contentLength == Int(n) else {
                    broken = true
                    return
                }
                contentLength = Int(n)
            }
        }
        guard !broken, let top = vias.first, let topVia = SIPVia.read(top) else { return .malformed }
        let available = length - bodyStart
        let bodyLength = contentLength ?? available
        guard bodyLength <= available else { return .malformed }

        guard let branch = topVia.branch, hasPrefix(branch, proxyBranchPrefix),
              ours.contains(where: { topVia.host.equalsIgnoringCase($0.host) && (topVia.port ?? 5060) == Int($0.port)
                                     && topVia.transport.equalsIgnoringCase($0.transport) }) else { return .notOurs }
        if hasPrefix(branch, probeBranchPrefix) { return .ownRequest(statusCode: Int(code)) }
        guard vias.count >= 2 else { return .noNextVia }
        guard let next = SIPVia.read(vias[1]) else { return .malformed }
        // The tag proves lookupd forwarded the request this answers: a forged response, even
        // from the upstream's address, is not relayed.
        guard let callID, let from, let cseq, let cseqNumber = parseCSeq(cseq)?.0,
              let fromTag = SIPNameAddress.read(from, arena: &s.arena)?.tag else { return .malformed }
        let tag = hex32(responseTag(key: branchKey, callID: callID, fromTag: fromTag, cseq: cseqNumber, clientBranch: next.branch ?? .empty))
        guard branch.count == proxyBranchLength, tag.utf8.elementsEqual(branch.bytes[(proxyBranchLength - 8)...]) else { return .notOurs }
        var callerFrom: SIPText? = nil
        if let callerFromKey {
            switch carriedFrom(topVia, branch: branch, key: callerFromKey, arena: &s.arena) {
            case .absent: break
            case .lines(let lines): callerFrom = lines
            case .forged: return .notOurs
            }
        }
        // Only where the request really came from: lookupd wrote both on every request it
        // forwarded, and never routes by an address the caller wrote.
        guard let received = next.received, isIPAddressText(received.string),
              let rport = next.parameters.value("rport"), let port = rport.parseDecimal(limit: 65535), port > 0 else { return .noNextVia }
        let hop = SIPNextHop(transport: next.transport.string.uppercased(), host: received.string, port: UInt16(port))

        var w = ByteWriter(out)
        w.append(statusLine)
        w.append("\r\n")
        var viaHeadersSeen = 0
        var sawContentLength = false
        forEachHeader(in: headers, from: firstLF + 1) { name, lines, folded in
            let kind = HeaderKind(name: name)
            if kind == .contentLength { sawContentLength = true }
            if kind == .from, let callerFrom {
                w.appendHeaderLines(callerFrom, folded: callerFrom.contains(ASCII.lf))
                w.append("\r\n")
                return
            }
            if kind == .via {
                viaHeadersSeen += 1
                // Empty Via lines before ours say nothing: not passed on.
                if viaHeadersSeen < firstViaHeader { return }
                if viaHeadersSeen == firstViaHeader {
                    // Our value was the first of this header: keep the others, in order.
                    guard firstViaItems > 1 else { return }
                    w.append("Via: ")
                    for i in 1..<firstViaItems {
                        if i > 1 { w.append(", ") }
                        w.append(vias[i])
                    }
                    w.append("\r\n")
                    return
                }
            }
            w.appendHeaderLines(trimLineEnds(lines), folded: folded)
            w.append("\r\n")
        }
        if !sawContentLength {
            w.append("Content-Length: ")
            w.appendDecimal(bodyLength)
            w.append("\r\n")
        }
        w.append("\r\n")
        w.append(s.raw + bodyStart, bodyLength)
        guard !w.overflowed else { return .malformed }
        return .forward(byteCount: w.count, statusCode: Int(code), nextHop: hop)
    }
}

/// The OPTIONS lookupd sends to the upstream to learn whether it is up.
public enum SIPProbe {
    /// Writes `OPTIONS sip:<upstream>` with our Via and a probe branch; `sequence` makes each
    /// probe its own transaction. Returns the byte count, 0 if `out` is too small.
    public static func write(via: SIPViaAddress, target: SIPViaAddress, sequence: UInt32, into out: UnsafeMutableRawBufferPointer) -> Int {
        guard isIPAddressText(via.host), isIPAddressText(target.host), isTokenString(via.transport) else { return 0 }
        var w = ByteWriter(out)
        func host(_ h: String) { if h.contains(":") { w.append("["); w.appendString(h); w.append("]") } else { w.appendString(h) } }
        w.append("OPTIONS sip:")
        host(target.host)
        w.append(":")
        w.appendDecimal(Int(target.port))
        w.append(" SIP/2.0\r\nVia: SIP/2.0/")
        w.appendString(via.transport)
        w.append(" ")
        host(via.host)
        w.append(":")
        w.appendDecimal(Int(via.port))
        w.append(";branch=")
        w.append(probeBranchPrefix)
        w.appendString(hex32(sequence))
        w.append(";rport\r\nMax-Forwards: 70\r\nFrom: <sip:lookupd@")
        host(via.host)
        w.append(">;tag=")
        w.appendString(hex32(sequence ^ 0x5a5a5a5a))
        w.append("\r\nTo: <sip:")
        host(target.host)
        w.append(":")
        w.appendDecimal(Int(target.port))
        w.append(">\r\nCall-ID: lookupd-probe-")
        w.appendString(hex32(sequence))
        w.append("\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n")
        return w.overflowed ? 0 : w.count
    }
}

private func hasPrefix(_ text: SIPText, _ prefix: StaticString) -> Bool {
    let n = prefix.utf8CodeUnitCount
    guard text.count >= n else { return false }
    return memcmpEqual(UnsafeRawBufferPointer(rebasing: text.bytes[0..<n]), UnsafeRawBufferPointer(start: prefix.utf8Start, count: n))
}
