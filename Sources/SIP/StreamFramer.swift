/// What the next bytes of a stream (TCP/TLS) connection hold.
///
/// Threading: a plain value; `Sendable`.
public enum SIPStreamFrame: Sendable, Hashable {
    /// Not enough bytes yet to decide.
    case needMore
    /// A complete message (header section plus Content-Length body) of this many bytes starts
    /// the buffer; hand exactly those to `SIPParser.parse`.
    case message(length: Int)
    /// CR/LF bytes to drop from the front. `pong`: they included a CRLFCRLF ping, answer with a
    /// single CRLF (RFC 5626 §3.5.1). Stray CRLFs before a message are ignored (RFC 3261 §7.5).
    case keepAlive(consume: Int, pong: Bool)
    /// The stream cannot be framed: close the connection.
    case invalid(SIPStreamError)
}

/// Why a stream cannot be framed.
///
/// Threading: a plain value; `Sendable`.
public enum SIPStreamError: Sendable, Hashable {
    /// Header section or header+body larger than the maximum message size.
    case tooLarge
    /// Content-Length is mandatory on streams (RFC 3261 §18.3, §20.14).
    case missingContentLength
    /// Non-numeric, negative, overflowing or conflicting Content-Length.
    case badContentLength
    /// The bytes do not start like a SIP message.
    case garbage
}

/// Frames SIP messages on a byte stream.
///
/// Threading: stateless; `Sendable`. The caller keeps the connection's receive buffer.
public struct SIPStreamFramer: Sendable {
    public let maxMessageSize: Int

    public init(maxMessageSize: Int = 16384) {
        self.maxMessageSize = maxMessageSize
    }

    public func frame(_ bytes: UnsafeRawBufferPointer) -> SIPStreamFrame {
        let n = bytes.count
        guard n > 0 else { return .needMore }

        // Leading CR/LF: consume whole CRLFCRLF pings and stray line ends, but keep a trailing
        // partial CRLF run that could still grow into a ping.
        if bytes[0] == ASCII.cr || bytes[0] == ASCII.lf {
            var runEnd = 0
            while runEnd < n, bytes[runEnd] == ASCII.cr || bytes[runEnd] == ASCII.lf { runEnd += 1 }
            var i = 0
            var pong = false
            while i < runEnd {
                if i + 4 <= runEnd, bytes[i] == ASCII.cr, bytes[i + 1] == ASCII.lf, bytes[i + 2] == ASCII.cr, bytes[i + 3] == ASCII.lf {
                    pong = true
                    i += 4
                    continue
                }
                if runEnd == n && isPingPrefix(bytes, from: i) { break }
                i += 1
            }
            return i > 0 ? .keepAlive(consume: i, pong: pong) : .needMore
        }

        guard isTokenByte(bytes[0]) else { return .invalid(.garbage) }

        // Find the empty line ending the header section (CRLFCRLF, or LF LF from sloppy peers).
        let limit = min(n, maxMessageSize)
        var headerEnd: Int?
        var i = 0
        while i < limit {
            if bytes[i] == ASCII.lf {
                if i + 1 < n, bytes[i + 1] == ASCII.lf { headerEnd = i + 2; break }
                if i + 2 < n, bytes[i + 1] == ASCII.cr, bytes[i + 2] == ASCII.lf { headerEnd = i + 3; break }
            }
            i += 1
        }
        guard let headerEnd else {
            return n >= maxMessageSize ? .invalid(.tooLarge) : .needMore
        }
        guard headerEnd <= maxMessageSize else { return .invalid(.tooLarge) }

        // Content-Length, from the header lines (folded continuation lines never hold a name).
        var contentLength: UInt64?
        let headers = SIPText(baseAddress: bytes.baseAddress, count: headerEnd)
        var lineStart = 0
        while lineStart < headerEnd, let lf = headers.firstIndex(of: ASCII.lf, from: lineStart) {
            let line = headers.slice(lineStart, lf)
            lineStart = lf + 1
            guard line.count > 0, !isWSP(line[0]), let colon = line.firstIndex(of: ASCII.colon) else { continue }
            let name = line.slice(0, colon).trimmingLWS()
            guard HeaderKind(name: name) == .contentLength else { continue }
            guard let value = line.slice(colon + 1, line.count).trimmingLWS().parseDecimal(limit: UInt64(Int32.max)) else {
                return .invalid(.badContentLength)
            }
            if let previous = contentLength, previous != value { return .invalid(.badContentLength) }
            contentLength = value
        }
        guard let contentLength else { return .invalid(.missingContentLength) }
        let total = headerEnd + Int(contentLength)
        guard total <= maxMessageSize else { return .invalid(.tooLarge) }
        return n >= total ? .message(length: total) : .needMore
    }

    private func isPingPrefix(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Bool {
        // CR LF CR LF: even offsets hold CR, odd ones LF.
        let count = bytes.count - start
        guard count < 4 else { return false }
        for k in 0..<count where bytes[start + k] != (k % 2 == 0 ? ASCII.cr : ASCII.lf) { return false }
        return true
    }
}
