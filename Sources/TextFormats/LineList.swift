/// Streaming reader for plain lists: one item per line.
///
/// Items are trimmed of spaces and tabs. Blank lines, lines whose first
/// non-blank character is `#`, and trailing comments (a `#` preceded by a
/// space or tab) are skipped, so `+8613800138000  # spam` yields the number
/// while `abc#1` stays whole. Items must be UTF-8; comments are not checked.
///
/// A value type. Not Sendable, because one created from an
/// `UnsafeRawBufferPointer` borrows that memory (and must not outlive it);
/// one created from `[UInt8]` owns its bytes. Create one per task.
public struct LineListReader {
    let storage: InputStorage

    public init(bytes: [UInt8]) {
        storage = .array(bytes)
    }

    /// Reads caller-owned memory, e.g. an mmap'd file, without copying it.
    public init(bytes: UnsafeRawBufferPointer) {
        storage = .raw(bytes)
    }

    /// Calls `body` with each item's line number and bytes. The bytes are a
    /// view into the input, valid only during the call. Errors thrown by
    /// `body` propagate unchanged.
    public func forEachItem(_ body: (_ line: Int, _ item: UnsafeRawBufferPointer) throws -> Void) throws {
        _ = try storage.withContent { p, end in try LineListReader.run(p, end: end, firstLine: 1, body) }
    }

    /// Reads one piece of a longer input (a pipe, a file of billions of
    /// lines): the bytes must end with a line feed, their first line is
    /// `firstLine`, and no BOM is stripped. Returns the line the next piece
    /// starts on.
    public func forEachItem(firstLine: Int, _ body: (_ line: Int, _ item: UnsafeRawBufferPointer) throws -> Void) throws -> Int {
        try storage.withRawContent { p, end in try LineListReader.run(p, end: end, firstLine: firstLine, body) }
    }

    private static func run(_ p: UnsafePointer<UInt8>, end: Int, firstLine: Int,
                            _ body: (_ line: Int, _ item: UnsafeRawBufferPointer) throws -> Void) throws -> Int {
        var i = 0
        var line = firstLine
        while i < end {
            let lineStart = i
            var hash = -1
            var high: UInt8 = 0
            while i < end {
                let b = p[i]
                if b == ASCII.lf || b == ASCII.cr { break }
                if b == ASCII.hash, hash < 0, i == lineStart || isBlank(p[i - 1]) { hash = i }
                high |= b
                i += 1
            }
            var stop = hash >= 0 ? hash : i
            var start = lineStart
            while start < stop, isBlank(p[start]) { start += 1 }
            while stop > start, isBlank(p[stop - 1]) { stop -= 1 }
            if start < stop {
                if high & 0x80 != 0, let bad = invalidUTF8Offset(p, from: start, to: stop) {
                    throw invalidUTF8Error(p, at: bad, line: line,
                                           column: column(p, lineStart: lineStart, target: bad))
                }
                try body(line, UnsafeRawBufferPointer(start: p + start, count: stop - start))
            }
            if i < end {
                if p[i] == ASCII.cr, i + 1 < end, p[i + 1] == ASCII.lf { i += 1 }
                i += 1
                line += 1
            }
        }
        return line
    }

    /// Every item as `(line, text)`; convenient for small files.
    public func items() throws -> [(line: Int, text: String)] {
        var result: [(line: Int, text: String)] = []
        try forEachItem { line, item in result.append((line: line, text: String(decoding: item, as: UTF8.self))) }
        return result
    }
}
