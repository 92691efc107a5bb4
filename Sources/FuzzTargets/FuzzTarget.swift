import Glibc

/// The fuzz targets: each takes arbitrary bytes and drives one entry point
/// lookupd exposes to untrusted input. A target returns normally for any
/// input; a crash, a sanitizer report or a failed `FuzzCheck` is a finding.
///
/// The same functions serve `lookupd-fuzz` (libFuzzer, or replaying files)
/// and the regression tests, so a saved input always replays through the
/// code that crashed on it.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// Bytes over the wire to the answer bytes: SIP parse, caller
    /// extraction, screening, response writing, TCP framing.
    case requestPath = "request-path"
    /// A directory file: open (header checks), lookups on the unverified
    /// file, `verify()`, and iteration of a verified one.
    case directory
    /// lookupd.conf.
    case config
    /// CSV: the reader, the directory compiler and contacts.
    case csv
    /// JSON and JSON Lines: the parser and the directory compiler.
    case json
    /// vCard: the reader, the directory compiler and contacts.
    case vcard
    /// A directory's journal, followed in two steps and read whole.
    case journal
    /// `mode = proxy`: requests from callers forwarded (and the upstream's answers to them
    /// relayed back only to where they came from), responses and requests from the upstream.
    case proxyPath = "proxy-path"

    public func run(_ bytes: UnsafeRawBufferPointer) {
        switch self {
        case .requestPath: RequestPathTarget.shared.run(bytes)
        case .directory: DirectoryTarget.run(bytes)
        case .config: TextTargets.config(bytes)
        case .csv: TextTargets.csv(bytes)
        case .json: TextTargets.json(bytes)
        case .vcard: TextTargets.vcard(bytes)
        case .journal: JournalTarget.run(bytes)
        case .proxyPath: ProxyPathTarget.shared.run(bytes)
        }
    }

    public func run(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { run($0) }
    }
}

/// Properties every input must keep; a violation stops the process so the
/// fuzzer records the input.
enum FuzzCheck {
    static func fail(_ what: String, _ bytes: UnsafeRawBufferPointer? = nil) -> Never {
        var message = "fuzz check failed: \(what)\n"
        if let bytes {
            message += "--- bytes (\(bytes.count)) ---\n"
            message += String(decoding: bytes.prefix(2048), as: UTF8.self).map { $0 == "\r" ? "\\r" : String($0) }.joined()
            message += "\n"
        }
        var text = message
        text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
        abort()
    }
}

/// The properties of every answer lookupd writes itself: one SIP response, or nothing; no bare
/// CR or LF, no NUL outside a quoted-pair, and no header line lookupd does not write (no text
/// from the request or the lists can start a header line of its own or end the header section
/// early); `Content-Length: 0` the single last header.
enum AnswerCheck {
    static let fixedHeaders: Set<String> = [
        "via", "from", "to", "call-id", "cseq", "contact", "p-asserted-identity",
        "reason", "call-info", "allow", "accept", "unsupported", "retry-after", "content-length",
    ]

    static func response(_ answer: UnsafeRawBufferPointer, labelHeader: String, request: UnsafeRawBufferPointer) {
        guard !answer.isEmpty else { return }
        let a = Array(answer)
        func fail(_ why: String) -> Never {
            FuzzCheck.fail("\(why)\n--- answer ---\n\(String(decoding: a, as: UTF8.self))", request)
        }
        guard a.count >= 16, a.starts(with: Array("SIP/2.0 ".utf8)) else { fail("answer does not start with SIP/2.0") }
        let code = a[8..<11]
        guard code.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), a[11] == 0x20, (0x31...0x36).contains(a[8]) else { fail("bad status code") }
        guard a.suffix(4).elementsEqual([13, 10, 13, 10]) else { fail("answer does not end with an empty line") }
        lineEnds(a, whole: true, fail)
        // Header lines between the status line and the final empty line.
        let head = a[..<(a.count - 4)]
        var lines = head.split(separator: 10, omittingEmptySubsequences: false).map { $0.last == 13 ? $0.dropLast() : $0 }
        lines.removeFirst()
        var contentLengths = 0
        for line in lines {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { fail("a line without a header name") }
            let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self).lowercased()
            if name == "content-length" { contentLengths += 1 }
            guard fixedHeaders.contains(name) || name == labelHeader.lowercased() else { fail("unexpected header '\(name)'") }
        }
        guard contentLengths == 1, lines.last.map({ $0.elementsEqual(Array("Content-Length: 0".utf8)) }) == true else {
            fail("Content-Length: 0 is not the single last header")
        }
    }

    /// No bare CR, no bare LF, no NUL outside a quoted-pair (copied headers may hold one, legal
    /// by RFC 4475 §3.1.1.2) in `bytes` (its header section only, unless `whole`).
    static func lineEnds(_ bytes: [UInt8], whole: Bool, _ fail: (String) -> Never) {
        var end = bytes.count
        if !whole, let blank = bytes.firstRange(of: [13, 10, 13, 10]) { end = blank.upperBound }
        for i in 0..<end {
            switch bytes[i] {
            case 0: if i == 0 || bytes[i - 1] != 0x5C { fail("NUL outside a quoted-pair") }
            case 13: if i + 1 >= bytes.count || bytes[i + 1] != 10 { fail("bare CR") }
            case 10: if i == 0 || bytes[i - 1] != 13 { fail("bare LF") }
            default: break
            }
        }
    }
}
