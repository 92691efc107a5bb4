// lookupd's own reading of the few header values it needs. libosip2 decides whether a message is
// well-formed, but its parsed values are lossy for our purposes (it %-decodes user parts into C
// strings, so `%00` truncates them, and it re-serialises rather than keeping the original bytes),
// so the values handed out and copied into responses come from the original text.

extension SIPURI {
    /// Reads a URI. Returns `nil` when there is no valid `scheme:`.
    static func read(_ raw: SIPText, arena: inout Arena) -> SIPURI? {
        let text = raw.trimmingLWS()
        guard let colon = text.firstIndex(of: ASCII.colon), colon > 0 else { return nil }
        let schemeText = text.slice(0, colon)
        guard isAlpha(schemeText[0]) else { return nil }
        for b in schemeText where !(isAlpha(b) || isDigit(b) || b == 0x2B || b == 0x2D || b == 0x2E) { return nil }

        var uri = SIPURI()
        uri.text = text
        uri.schemeText = schemeText
        let rest = text.slice(colon + 1, text.count)
        if schemeText.equalsLiteral("sip") {
            uri.scheme = .sip
        } else if schemeText.equalsLiteral("sips") {
            uri.scheme = .sips
        } else if schemeText.equalsLiteral("tel") {
            uri.scheme = .tel
            // telephone-subscriber: number, then ;parameters (RFC 3966).
            let semi = rest.firstIndex(of: ASCII.semicolon) ?? rest.count
            let number = rest.slice(0, semi)
            uri.rawUser = number
            uri.user = arena.percentDecoded(number)
            uri.parameters = SIPParameters(rest.slice(semi, rest.count))
            return uri
        } else {
            uri.scheme = .other
            return uri
        }

        // sip/sips. '@' cannot appear unescaped in host, parameters or headers, but ';' and '?'
        // may appear in the user part, so the user part ends at the last '@'.
        var hostStart = 0
        var lastAt: Int?
        var i = 0
        while let at = rest.firstIndex(of: ASCII.at, from: i) { lastAt = at; i = at + 1 }
        if let at = lastAt {
            let userinfo = rest.slice(0, at)
            let userEnd = userinfo.firstIndex(of: ASCII.colon) ?? userinfo.count
            let rawUser = userinfo.slice(0, userEnd)
            uri.rawUser = rawUser
            uri.user = arena.percentDecoded(rawUser)
            hostStart = at + 1
        }
        let afterUser = rest.slice(hostStart, rest.count)
        let question = afterUser.firstIndex(of: ASCII.question) ?? afterUser.count
        uri.headers = afterUser.slice(min(question + 1, afterUser.count), afterUser.count)
        let hostPortParams = afterUser.slice(0, question)
        let semi = hostPortParams.firstIndex(of: ASCII.semicolon) ?? hostPortParams.count
        uri.parameters = SIPParameters(hostPortParams.slice(semi, hostPortParams.count))
        let hostPort = hostPortParams.slice(0, semi)
        var portStart: Int?
        if hostPort.count > 0 && hostPort[0] == ASCII.leftBracket {
            guard let close = hostPort.firstIndex(of: ASCII.rightBracket) else { return nil }
            uri.host = hostPort.slice(0, close + 1)
            if close + 1 < hostPort.count {
                guard hostPort[close + 1] == ASCII.colon else { return nil }
                portStart = close + 2
            }
        } else if let c = hostPort.firstIndex(of: ASCII.colon) {
            uri.host = hostPort.slice(0, c)
            portStart = c + 1
        } else {
            uri.host = hostPort
        }
        if let ps = portStart {
            guard let port = hostPort.slice(ps, hostPort.count).parseDecimal(limit: 65535) else { return nil }
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
