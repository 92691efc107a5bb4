// lookupd's own reading of the few header values it needs. libosip2 decides whether a message is
// well-formed, but its parsed values are lossy for our purposes (it %-decodes user parts into C
// strings, so `%00` truncates them, and it re-serialises rather than keeping the original bytes),
// so the values handed out and copied into responses come from the original text.

extension SIPURI {
    /// Reads a URI. Returns `nil` when there is no valid `scheme:`.
    ///
    /// Written as forward scans over the raw bytes (it runs for the Request-URI, From and To of
    /// every request); offsets name the same pieces as before: the user part ends at the last
    /// '@' (minus `:password`), headers start after the first '?', parameters at the first ';'
    /// after the user part.
    static func read(_ raw: SIPText, arena: inout Arena) -> SIPURI? {
        let text = raw.trimmingLWS()
        guard let p = text.baseAddress else { return nil }
        let n = text.count
        @inline(__always) func at(_ i: Int) -> UInt8 { p.load(fromByteOffset: i, as: UInt8.self) }
        @inline(__always) func piece(_ from: Int, _ to: Int) -> SIPText { SIPText(baseAddress: p + from, count: to - from) }
        @inline(__always) func first(_ b: UInt8, _ from: Int, _ to: Int) -> Int? {
            let i = firstOf(b, b, in: p, from: from, to: to)
            return i < to ? i : nil
        }

        guard let colon = first(ASCII.colon, 0, n), colon > 0, isAlpha(at(0)) else { return nil }
        for i in 0..<colon {
            let b = at(i)
            guard isAlpha(b) || isDigit(b) || b == 0x2B || b == 0x2D || b == 0x2E else { return nil }
        }
        var uri = SIPURI()
        uri.text = text
        uri.schemeText = piece(0, colon)
        let rest = colon + 1
        let s0 = at(0) | 0x20, s1 = colon > 1 ? at(1) | 0x20 : 0, s2 = colon > 2 ? at(2) | 0x20 : 0
        if colon == 3, s0 == UInt8(ascii: "s"), s1 == UInt8(ascii: "i"), s2 == UInt8(ascii: "p") {
            uri.scheme = .sip
        } else if colon == 4, s0 == UInt8(ascii: "s"), s1 == UInt8(ascii: "i"), s2 == UInt8(ascii: "p"), at(3) | 0x20 == UInt8(ascii: "s") {
            uri.scheme = .sips
        } else if colon == 3, s0 == UInt8(ascii: "t"), s1 == UInt8(ascii: "e"), s2 == UInt8(ascii: "l") {
            uri.scheme = .tel
            // telephone-subscriber: number, then ;parameters (RFC 3966).
            let semi = first(ASCII.semicolon, rest, n) ?? n
            let number = piece(rest, semi)
            uri.rawUser = number
            uri.user = arena.percentDecoded(number)
            uri.parameters = SIPParameters(piece(semi, n))
            return uri
        } else {
            uri.scheme = .other
            return uri
        }

        // sip/sips. '@' cannot appear unescaped in host, parameters or headers, but ';' and '?'
        // may appear in the user part, so the user part ends at the last '@'.
        var hostStart = rest
        var lastAt = -1
        var from = rest
        while let a = first(ASCII.at, from, n) {
            lastAt = a
            from = a + 1
        }
        if lastAt >= rest {
            let userEnd = first(ASCII.colon, rest, lastAt) ?? lastAt
            let rawUser = piece(rest, userEnd)
            uri.rawUser = rawUser
            uri.user = arena.percentDecoded(rawUser)
            hostStart = lastAt + 1
        }
        let question = first(ASCII.question, hostStart, n) ?? n
        uri.headers = piece(Swift.min(question + 1, n), n)
        let semi = first(ASCII.semicolon, hostStart, question) ?? question
        uri.parameters = SIPParameters(piece(semi, question))
        var portStart: Int?
        if hostStart < semi && at(hostStart) == ASCII.leftBracket {
            guard let close = first(ASCII.rightBracket, hostStart, semi) else { return nil }
            uri.host = piece(hostStart, close + 1)
            if close + 1 < semi {
                guard at(close + 1) == ASCII.colon else { return nil }
                portStart = close + 2
            }
        } else if let c = first(ASCII.colon, hostStart, semi) {
            uri.host = piece(hostStart, c)
            portStart = c + 1
        } else {
            uri.host = piece(hostStart, semi)
        }
        if let ps = portStart {
            guard let port = piece(ps, semi).parseDecimal(limit: 65535) else { return nil }
            uri.port = Int(port)
        }
        if (uri.host?.count ?? 0) == 0 { return nil }
        return uri
    }
}

extension SIPNameAddress {
    /// Reads `display-name <URI>;params`, `<URI>;params` or `URI;params` (RFC 3261 §20.10, §20.20).
    static func read(_ raw: SIPText, arena: inout Arena) -> SIPNameAddress? {
        let value = raw.trimmingLWS()
        guard value.count > 0 else { return nil }
        var result = SIPNameAddress()
        var uriText: SIPText
        var afterURI: SIPText

        if value[0] == ASCII.quote {
            var i = 1
            var close: Int?
            while i < value.count {
                let b = value[i]
                if b == ASCII.backslash { i += 2; continue }
                if b == ASCII.quote { close = i; break }
                i += 1
            }
            guard let q = close else { return nil }
            result.rawDisplayName = value.slice(0, q + 1)
            result.displayName = arena.unquoted(value.slice(1, q))
            let rest = value.slice(q + 1, value.count).trimmingLWS()
            guard rest.count > 0, rest[0] == ASCII.lessThan, let gt = rest.firstIndex(of: ASCII.greaterThan) else { return nil }
            uriText = rest.slice(1, gt)
            afterURI = rest.slice(gt + 1, rest.count)
        } else if let lt = value.firstIndex(of: ASCII.lessThan) {
            let display = value.slice(0, lt).trimmingLWS()
            if display.count > 0 {
                let unfolded = arena.unfolded(display)
                result.rawDisplayName = unfolded
                result.displayName = unfolded
            }
            let rest = value.slice(lt, value.count)
            guard let gt = rest.firstIndex(of: ASCII.greaterThan) else { return nil }
            uriText = rest.slice(1, gt)
            afterURI = rest.slice(gt + 1, rest.count)
        } else {
            // addr-spec: a URI containing ';', ',' or '?' must be in <>, so the URI ends at the
            // first ';' and everything after belongs to the header field (RFC 3261 §20).
            var end = 0
            while end < value.count, value[end] != ASCII.semicolon, !isLWS(value[end]) { end += 1 }
            uriText = value.slice(0, end)
            afterURI = value.slice(end, value.count)
        }
        afterURI = afterURI.trimmingLWS()
        guard afterURI.count == 0 || afterURI[0] == ASCII.semicolon else { return nil }
        guard let uri = SIPURI.read(uriText, arena: &arena) else { return nil }
        result.uri = uri
        result.parameters = SIPParameters(afterURI)
        return result
    }
}

extension SIPVia {
    /// Reads one via-parm: `SIP / 2.0 / UDP host[:port] ;params` with LWS allowed around the
    /// slashes and the colon (RFC 3261 §20.42 and RFC 4475 §3.1.1.1).
    static func read(_ raw: SIPText) -> SIPVia? {
        let v = raw.trimmingLWS()
        var i = 0
        func skipLWS() { while i < v.count, isLWS(v[i]) { i += 1 } }
        func token() -> SIPText? {
            let s = i
            while i < v.count, isTokenByte(v[i]) { i += 1 }
            return i > s ? v.slice(s, i) : nil
        }
        func expect(_ b: UInt8) -> Bool {
            skipLWS()
            guard i < v.count, v[i] == b else { return false }
            i += 1
            skipLWS()
            return true
        }
        var via = SIPVia()
        guard let name = token(), expect(ASCII.slash), let version = token(), expect(ASCII.slash),
              let transport = token() else { return nil }
        via.protocolName = name
        via.protocolVersion = version
        via.transport = transport
        let beforeHost = i
        skipLWS()
        guard i > beforeHost, i < v.count else { return nil }
        if v[i] == ASCII.leftBracket {
            let s = i + 1
            while i < v.count, v[i] != ASCII.rightBracket { i += 1 }
            guard i < v.count, i > s else { return nil }
            via.host = v.slice(s, i)
            i += 1
        } else {
            let s = i
            while i < v.count, isTokenByte(v[i]) { i += 1 }
            guard i > s else { return nil }
            via.host = v.slice(s, i)
        }
        skipLWS()
        if i < v.count, v[i] == ASCII.colon {
            i += 1
            skipLWS()
            let s = i
            while i < v.count, isDigit(v[i]) { i += 1 }
            guard let port = v.slice(s, i).parseDecimal(limit: 65535) else { return nil }
            via.port = Int(port)
            skipLWS()
        }
        if i < v.count {
            guard v[i] == ASCII.semicolon else { return nil }
            via.parameters = SIPParameters(v.slice(i, v.count))
        }
        return via
    }
}
