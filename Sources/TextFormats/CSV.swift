/// The field separators lookupd accepts in CSV files.
public enum CSVDelimiter: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case comma = 0x2C
    case semicolon = 0x3B
    case tab = 0x09
    case pipe = 0x7C

    public var description: String {
        switch self {
        case .comma: return "','"
        case .semicolon: return "';'"
        case .tab: return "tab"
        case .pipe: return "'|'"
        }
    }

    /// Guesses the delimiter from a header line: the candidate occurring most
    /// often outside quotes wins (ties in declaration order); nil when the line
    /// contains none, i.e. a single-column file, where any delimiter works.
    public static func detect(headerLine: UnsafeRawBufferPointer) -> CSVDelimiter? {
        var counts = [Int](repeating: 0, count: allCases.count)
        var inQuotes = false
        for b in headerLine {
            if b == ASCII.lf || b == ASCII.cr { if !inQuotes { break } }
            if b == ASCII.quote { inQuotes.toggle(); continue }
            if inQuotes { continue }
            for (i, d) in allCases.enumerated() where d.rawValue == b { counts[i] += 1 }
        }
        var best: CSVDelimiter?
        var bestCount = 0
        for (i, d) in allCases.enumerated() where counts[i] > bestCount {
            best = d
            bestCount = counts[i]
        }
        return best
    }

    /// Like `detect(headerLine:)`, applied to the first line of `bytes` that
    /// is not blank and not a `#` comment (after any BOM).
    public static func detect(in bytes: UnsafeRawBufferPointer) -> CSVDelimiter? {
        InputStorage.raw(bytes).withContent { p, end in
            var i = 0
            while i < end {
                var lineEnd = i
                while lineEnd < end, p[lineEnd] != ASCII.lf, p[lineEnd] != ASCII.cr { lineEnd += 1 }
                var first = i
                while first < lineEnd, isBlank(p[first]) { first += 1 }
                if first < lineEnd, p[first] != ASCII.hash {
                    return detect(headerLine: UnsafeRawBufferPointer(start: p + first, count: lineEnd - first))
                }
                i = lineEnd + 1
            }
            return nil
        }
    }

    public static func detect(in bytes: [UInt8]) -> CSVDelimiter? {
        bytes.withUnsafeBytes { detect(in: $0) }
    }
}

/// One CSV record, handed to the `CSVReader.forEachRecord` callback.
///
/// Fields are views into the input, or into the reader's scratch buffer for
/// quoted fields containing `""`. They are valid only during the callback:
/// copy out (e.g. with `string(_:)`) anything you keep. Field bytes are
/// valid UTF-8, already unquoted, and unquoted fields are trimmed.
public struct CSVRecord {
    @usableFromInline let input: UnsafePointer<UInt8>
    @usableFromInline let scratch: UnsafePointer<UInt8>
    @usableFromInline let spans: UnsafePointer<CSVFieldSpan>
    /// Number of fields.
    public let count: Int
    /// Line on which the record starts.
    public let line: Int
    /// Line on which the record ends (differs from `line` only when a quoted
    /// field contains line breaks).
    public let endLine: Int

    @inlinable
    public subscript(i: Int) -> UnsafeRawBufferPointer {
        precondition(i >= 0 && i < count, "CSV field index out of range")
        let span = spans[i]
        let base = span.inScratch ? scratch : input
        return UnsafeRawBufferPointer(start: base + span.start, count: span.length)
    }

    /// Field `i` as a String.
    @inlinable
    public func string(_ i: Int) -> String {
        String(decoding: self[i], as: UTF8.self)
    }

    /// Whether field `i` was written in quotes (so `""` means "explicitly
    /// empty" rather than "missing", if a caller cares).
    @inlinable
    public func isQuoted(_ i: Int) -> Bool {
        precondition(i >= 0 && i < count, "CSV field index out of range")
        return spans[i].quoted
    }

    /// All fields as Strings.
    public var strings: [String] {
        (0..<count).map { string($0) }
    }
}

@usableFromInline
struct CSVFieldSpan {
    @usableFromInline var start: Int
    @usableFromInline var length: Int
    @usableFromInline var inScratch: Bool
    @usableFromInline var quoted: Bool
}

/// Streaming CSV reader (RFC 4180 plus what operators write).
///
/// - Quoted fields use `""` for a quote and may span lines.
/// - Whitespace around fields is trimmed (spaces, and tabs unless tab is the
///   delimiter); whitespace inside quotes is kept.
/// - Blank lines and lines whose first non-blank character is `#` are skipped.
/// - A `"` inside an unquoted field is kept literally (`5" screen`).
/// - Input may start with a BOM; lines end in LF, CRLF or CR. Fields must be
///   UTF-8; comment lines are not checked since nothing reads them. Quoted
///   fields may hold line breaks and any other character: sanitise before
///   putting a field into a SIP header.
///
/// A value type. Not Sendable, because one created from an
/// `UnsafeRawBufferPointer` borrows that memory (and must not outlive it);
/// one created from `[UInt8]` owns its bytes. Create one per task.
public struct CSVReader {
    let storage: InputStorage
    /// Field separator.
    public var delimiter: CSVDelimiter
    /// When set, a record with another number of fields is an error.
    public var expectedFieldCount: Int?
    /// Whether `#` lines are comments (on by default).
    public var allowsComments: Bool = true

    public init(bytes: [UInt8], delimiter: CSVDelimiter = .comma, expectedFieldCount: Int? = nil) {
        self.storage = .array(bytes)
        self.delimiter = delimiter
        self.expectedFieldCount = expectedFieldCount
    }

    /// Reads caller-owned memory, e.g. an mmap'd file, without copying it.
    public init(bytes: UnsafeRawBufferPointer, delimiter: CSVDelimiter = .comma, expectedFieldCount: Int? = nil) {
        self.storage = .raw(bytes)
        self.delimiter = delimiter
        self.expectedFieldCount = expectedFieldCount
    }

    /// Calls `body` for each record in order. Stops at the first error, so
    /// records before a bad one have already been delivered; errors thrown by
    /// `body` propagate unchanged.
    public func forEachRecord(_ body: (CSVRecord) throws -> Void) throws {
        _ = try storage.withContent { p, end in
            try CSVParser.run(p, end: end, delimiter: delimiter.rawValue,
                              expectedFieldCount: expectedFieldCount,
                              allowsComments: allowsComments, body)
        }
    }

    /// Reads one piece of a longer input, for sources read in chunks (a
    /// pipe, a file of billions of lines): the bytes must end with a line
    /// feed, their first line is `firstLine`, and no BOM is stripped. With
    /// `more` set, a record cut off by the end (a quoted field going on
    /// past it) is not delivered: the result says where it starts, so the
    /// caller hands it over again with what follows. Returns the bytes
    /// consumed and the line the next piece starts on.
    public func forEachRecord(firstLine: Int, more: Bool,
                              _ body: (CSVRecord) throws -> Void) throws -> (consumed: Int, nextLine: Int) {
        try storage.withRawContent { p, end in
            try CSVParser.run(p, end: end, delimiter: delimiter.rawValue,
                              expectedFieldCount: expectedFieldCount,
                              allowsComments: allowsComments, firstLine: firstLine, more: more, body)
        }
    }

    /// Every record as `(line, fields)`; convenient for small files.
    public func records() throws -> [(line: Int, fields: [String])] {
        var result: [(line: Int, fields: [String])] = []
        try forEachRecord { result.append((line: $0.line, fields: $0.strings)) }
        return result
    }
}

enum CSVParser {
    /// Returns the bytes consumed and the next line (with `more`, a record
    /// reaching the end of the input is left for the next call).
    @discardableResult
    static func run(_ p: UnsafePointer<UInt8>, end: Int, delimiter d: UInt8, expectedFieldCount: Int?,
                    allowsComments: Bool, firstLine: Int = 1, more: Bool = false,
                    _ body: (CSVRecord) throws -> Void) throws -> (consumed: Int, nextLine: Int) {
        // With a tab delimiter a tab is never padding.
        let blank2: UInt8 = d == ASCII.tab ? ASCII.space : ASCII.tab
        let ones: UInt64 = 0x0101_0101_0101_0101
        let delimiters = UInt64(d) &* ones, lineFeeds = UInt64(ASCII.lf) &* ones, returns = UInt64(ASCII.cr) &* ones
        /// High bit set in each zero byte of `x` (and maybe above the lowest one).
        @inline(__always) func zeroBytes(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & 0x8080_8080_8080_8080 }
        var spanCapacity = 16
        var spans = UnsafeMutablePointer<CSVFieldSpan>.allocate(capacity: spanCapacity)
        var scratchCapacity = 256
        var scratch = UnsafeMutablePointer<UInt8>.allocate(capacity: scratchCapacity)
        defer {
            spans.deallocate()
            scratch.deallocate()
        }
        var scratchCount = 0

        @inline(__always)
        func appendScratch(_ from: Int, _ to: Int) {
            let n = to - from
            if scratchCount + n > scratchCapacity {
                var newCapacity = scratchCapacity * 2
                while newCapacity < scratchCount + n { newCapacity *= 2 }
                let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
                grown.update(from: scratch, count: scratchCount)
                scratch.deallocate()
                scratch = grown
                scratchCapacity = newCapacity
            }
            (scratch + scratchCount).update(from: p + from, count: n)
            scratchCount += n
        }

        var i = 0
        var line = firstLine
        while i < end {
            let recordStart = i
            let recordLine = line
            var b: UInt8 = 0
            while i < end {
                b = p[i]
                if b == ASCII.space || b == blank2 { i += 1 } else { break }
            }
            if i == end { break }
            if b == ASCII.lf || b == ASCII.cr {
                i += 1
                if b == ASCII.cr, i < end, p[i] == ASCII.lf { i += 1 }
                line += 1
                continue
            }
            if b == ASCII.hash, allowsComments {
                while i < end, p[i] != ASCII.lf, p[i] != ASCII.cr { i += 1 }
                continue  // the line end is consumed as a blank line
            }

            var fieldCount = 0
            var high: UInt8 = 0
            scratchCount = 0
            while true {
                while i < end {
                    b = p[i]
                    if b == ASCII.space || b == blank2 { i += 1 } else { break }
                }
                if fieldCount == spanCapacity {
                    let grown = UnsafeMutablePointer<CSVFieldSpan>.allocate(capacity: spanCapacity * 2)
                    grown.moveInitialize(from: spans, count: fieldCount)
                    spans.deallocate()
                    spans = grown
                    spanCapacity *= 2
                }
                if i < end, p[i] == ASCII.quote {
                    let openLine = line
                    i += 1
                    var segment = i
                    var escaped = false
                    let scratchStart = scratchCount
                    while true {
                        if i == end {
                            if more { return (recordStart, recordLine) }
                            let lastLine = (p[end - 1] == ASCII.lf || p[end - 1] == ASCII.cr) ? line - 1 : line
                            throw TextFormatError(
                                line: lastLine,
                                message: "unterminated quoted field (opened on line \(openLine))")
                        }
                        b = p[i]
                        if b == ASCII.quote {
                            if i + 1 < end, p[i + 1] == ASCII.quote {
                                appendScratch(segment, i + 1)
                                escaped = true
                                i += 2
                                segment = i
                                continue
                            }
                            break
                        }
                        high |= b
                        if b == ASCII.lf {
                            line += 1
                        } else if b == ASCII.cr {
                            line += 1
                            if i + 1 < end, p[i + 1] == ASCII.lf { i += 1 }
                        }
                        i += 1
                    }
                    if escaped {
                        appendScratch(segment, i)
                        (spans + fieldCount).initialize(to: CSVFieldSpan(
                            start: scratchStart, length: scratchCount - scratchStart, inScratch: true, quoted: true))
                    } else {
                        (spans + fieldCount).initialize(to: CSVFieldSpan(
                            start: segment, length: i - segment, inScratch: false, quoted: true))
                    }
                    i += 1
                    while i < end {
                        b = p[i]
                        if b == ASCII.space || b == blank2 { i += 1 } else { break }
                    }
                    if i < end, b != d, b != ASCII.lf, b != ASCII.cr {
                        let at = locate(p, end: end, lineStart: recordStart, line: recordLine, target: i)
                        throw TextFormatError(
                            line: at.line, column: at.column,
                            message: "unexpected \(describeCharacter(p, at: i, end: end)) after closing quote of field \(fieldCount + 1) (a quote inside a quoted field must be doubled: \"\")")
                    }
                } else {
                    let start = i
                    // Eight bytes a step to the delimiter or the line end: the
                    // lowest byte the zero-byte test flags is exact. `high`
                    // only decides whether the record's UTF-8 is checked, so
                    // it may take in the bytes after the stop.
                    while i + 8 <= end {
                        let w = UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)
                        let stops = zeroBytes(w ^ delimiters) | zeroBytes(w ^ lineFeeds) | zeroBytes(w ^ returns)
                        if w & 0x8080_8080_8080_8080 != 0 { high |= 0x80 }
                        if stops != 0 {
                            i += stops.trailingZeroBitCount >> 3
                            break
                        }
                        i += 8
                    }
                    while i < end {
                        b = p[i]
                        if b == d || b == ASCII.lf || b == ASCII.cr { break }
                        high |= b
                        i += 1
                    }
                    var stop = i
                    while stop > start, p[stop - 1] == ASCII.space || p[stop - 1] == blank2 { stop -= 1 }
                    (spans + fieldCount).initialize(to: CSVFieldSpan(
                        start: start, length: stop - start, inScratch: false, quoted: false))
                }
                fieldCount += 1
                if i < end, p[i] == d {
                    i += 1
                    continue
                }
                break
            }
            let recordEnd = i
            let endLine = line
            // Cut off by the end of this piece: the rest comes with the next.
            if more, i == end || (p[i] == ASCII.cr && i + 1 == end) { return (recordStart, recordLine) }
            if i < end {
                if p[i] == ASCII.cr, i + 1 < end, p[i + 1] == ASCII.lf { i += 1 }
                i += 1
                line += 1
            }
            if high & 0x80 != 0, let bad = invalidUTF8Offset(p, from: recordStart, to: recordEnd) {
                let at = locate(p, end: end, lineStart: recordStart, line: recordLine, target: bad)
                throw invalidUTF8Error(p, at: bad, line: at.line, column: at.column)
            }
            if let expected = expectedFieldCount, fieldCount != expected {
                throw TextFormatError(
                    line: recordLine,
                    message: "expected \(expected) field\(expected == 1 ? "" : "s") separated by \(CSVDelimiter(rawValue: d).map { $0.description } ?? "delimiter"), found \(fieldCount)")
            }
            try body(CSVRecord(input: p, scratch: scratch, spans: spans, count: fieldCount,
                               line: recordLine, endLine: endLine))
        }
        return (end, line)
    }
}
