import Glibc
import TextFormats

/// Carrier names by number prefix, read from python3-phonenumbers' `carrierdata` folder
/// (Debian's C++ libphonenumber has no carrier mapper; the Python package carries the same
/// project's data). The files are generated Python (`data = { '8613800':{'en': 'China
/// Mobile', 'zh': u('\u4e2d...')}, ... }`); lookupd reads that literal syntax, strictly,
/// once per start or reload, and never runs Python. A line it cannot read is an error
/// naming file and line, so a change of format is reported instead of misread.
///
/// Lookups follow the Python package's `carrier.name_for_number`: the longest prefix of
/// the E.164 number the data holds decides; its name in the language, else (except for
/// Chinese, Japanese and Korean) in English, else none.
///
/// Threading: immutable after `init`.
struct CarrierData: Sendable {
    /// `__version__` of the package, when its `__init__.py` says.
    let version: String?
    /// Per prefix length (index = digits, country code included), sorted prefixes and the
    /// name each one resolves to (an index into `names`, -1 for none in this language).
    private var prefixes: [[UInt64]] = Array(repeating: [], count: 20)
    private var nameOf: [[Int32]] = Array(repeating: [], count: 20)
    private var names: [[UInt8]] = []
    /// Lengths present, longest first.
    private var lengths: [Int] = []
    private(set) var entryCount = 0

    init(folder: String, language: String) throws(CarrierDataError) {
        let base = String(language.split(separator: "_").first ?? Substring(language))
        let mayFallBack = base != "zh" && base != "ja" && base != "ko"
        var files: [String] = []
        guard let dir = opendir(folder) else { throw .unreadable(folder, errno) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name.hasPrefix("data"), name.hasSuffix(".py") { files.append(name) }
        }
        closedir(dir)
        // data0.py, data1.py, ..., data10.py: later files update earlier ones.
        files.sort { (Int($0.dropFirst(4).dropLast(3)) ?? 0, $0) < (Int($1.dropFirst(4).dropLast(3)) ?? 0, $1) }
        guard !files.isEmpty else { throw .noFiles(folder) }
        var table: [UInt64: (length: Int, name: Int32)] = [:]
        var nameIndex: [[UInt8]: Int32] = [:]
        for file in files {
            let path = folder.hasSuffix("/") ? folder + file : folder + "/" + file
            let bytes: [UInt8]
            do { bytes = try CarrierData.read(path) } catch { throw error }
            try CarrierData.parse(bytes, path: path) { prefix, length, entries throws(CarrierDataError) in
                var chosen: [UInt8]? = nil
                for (lang, name) in entries where lang == language { chosen = name }
                if chosen == nil { for (lang, name) in entries where lang == base { chosen = name } }
                if chosen == nil, mayFallBack { for (lang, name) in entries where lang == "en" { chosen = name } }
                var index: Int32 = -1
                if let chosen, !chosen.isEmpty {
                    if let i = nameIndex[chosen] { index = i } else {
                        index = Int32(nameIndex.count)
                        nameIndex[chosen] = index
                    }
                }
                // The key keeps the length: `86130` and `861300` are different prefixes.
                table[UInt64(length) << 56 | prefix] = (length, index)
            }
        }
        var names = [[UInt8]](repeating: [], count: nameIndex.count)
        for (name, i) in nameIndex { names[Int(i)] = name }
        self.names = names
        var byLength: [[(UInt64, Int32)]] = Array(repeating: [], count: 20)
        for (key, value) in table {
            byLength[value.length].append((key & ((1 << 56) - 1), value.name))
        }
        for l in 0..<20 where !byLength[l].isEmpty {
            byLength[l].sort { $0.0 < $1.0 }
            prefixes[l] = byLength[l].map(\.0)
            nameOf[l] = byLength[l].map(\.1)
            lengths.append(l)
        }
        lengths.reverse()
        entryCount = table.count
        version = CarrierData.packageVersion(folder)
    }

    /// The carrier's name for a number, as UTF-8; empty when none.
    func withName<R>(_ number: PhoneNumber, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let digits = number.digitCount
        for length in lengths where length <= digits {
            let key = number.value / powersOfTen[digits - length]
            let keys = prefixes[length]
            var lo = 0, hi = keys.count
            while lo < hi {
                let mid = (lo + hi) >> 1
                if keys[mid] < key { lo = mid + 1 } else { hi = mid }
            }
            if lo < keys.count, keys[lo] == key {
                let i = nameOf[length][lo]
                if i < 0 { break }
                return try names[Int(i)].withUnsafeBytes(body)
            }
        }
        return try body(UnsafeRawBufferPointer(start: nil, count: 0))
    }

    static func read(_ path: String) throws(CarrierDataError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .unreadable(path, errno) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .unreadable(path, errno)
            }
            if n == 0 { break }
            bytes += chunk[0..<n]
            if bytes.count > 64 << 20 { throw .syntax(path, 0, "larger than 64 MiB") }
        }
        return bytes
    }

    /// `__version__ = "8.12.57"` from the package's `__init__.py`, one folder up.
    static func packageVersion(_ folder: String) -> String? {
        var parent = folder
        while parent.hasSuffix("/") { parent.removeLast() }
        guard let slash = parent.lastIndex(of: "/") else { return nil }
        parent = String(parent[..<slash])
        guard let bytes = try? read(parent + "/__init__.py") else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix("__version__") {
            let quoted = line.split(separator: "\"")
            if quoted.count >= 2 { return String(quoted[1]) }
            let single = line.split(separator: "'")
            if single.count >= 2 { return String(single[1]) }
        }
        return nil
    }

    /// Reads the `data = { ... }` literal: one entry per line,
    /// ` 'PREFIX':{'LANG': 'NAME', 'LANG': u('NAME')},`.
    static func parse(_ bytes: [UInt8], path: String,
                      _ entry: (UInt64, Int, [(String, [UInt8])]) throws(CarrierDataError) -> Void) throws(CarrierDataError) {
        var lineNumber = 0
        var inData = false
        var sawEnd = false
        var start = 0
        while start < bytes.count {
            var end = start
            while end < bytes.count, bytes[end] != 0x0A { end += 1 }
            lineNumber += 1
            let line = bytes[start..<end]
            start = end + 1
            if !inData {
                if line.elementsEqual("data = {".utf8) { inData = true }
                continue
            }
            if line.elementsEqual("}".utf8) { sawEnd = true; break }
            var s = LiteralScanner(line: Array(line), path: path, lineNumber: lineNumber)
            try s.skipSpaces()
            let key = try s.string()
            guard !key.isEmpty, key.count <= 18, key.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), key[0] != 0x30 else {
                throw s.fail("a prefix must be digits")
            }
            var prefix: UInt64 = 0
            for d in key { prefix = prefix * 10 + UInt64(d - 0x30) }
            try s.expect(UInt8(ascii: ":"))
            try s.expect(UInt8(ascii: "{"))
            var entries: [(String, [UInt8])] = []
            while true {
                try s.skipSpaces()
                if s.peek == UInt8(ascii: "}") { s.advance(); break }
                let lang = try s.string()
                try s.expect(UInt8(ascii: ":"))
                try s.skipSpaces()
                let name = try s.value()
                entries.append((String(decoding: lang, as: UTF8.self), name))
                try s.skipSpaces()
                if s.peek == UInt8(ascii: ",") { s.advance() }
            }
            if s.peek == UInt8(ascii: ",") { s.advance() }
            try s.skipSpaces()
            guard s.atEnd else { throw s.fail("unexpected text after the entry") }
            try entry(prefix, key.count, entries)
        }
        guard inData, sawEnd else { throw .syntax(path, lineNumber, "no complete 'data = { ... }' literal") }
    }
}

/// A cursor over one line of the carrier files' Python literal.
private struct LiteralScanner {
    let line: [UInt8]
    let path: String
    let lineNumber: Int
    var i = 0

    var atEnd: Bool { i >= line.count }
    var peek: UInt8? { i < line.count ? line[i] : nil }
    mutating func advance() { i += 1 }

    func fail(_ reason: String) -> CarrierDataError { .syntax(path, lineNumber, reason) }

    mutating func skipSpaces() throws(CarrierDataError) {
        while i < line.count, line[i] == 0x20 || line[i] == 0x09 || line[i] == 0x0D { i += 1 }
    }

    mutating func expect(_ c: UInt8) throws(CarrierDataError) {
        try skipSpaces()
        guard i < line.count, line[i] == c else { throw fail("expected '\(Character(Unicode.Scalar(c)))'") }
        i += 1
    }

    /// `'text'` or `u('text')`.
    mutating func value() throws(CarrierDataError) -> [UInt8] {
        if peek == UInt8(ascii: "u"), i + 1 < line.count, line[i + 1] == UInt8(ascii: "(") {
            i += 2
            let text = try string()
            try expect(UInt8(ascii: ")"))
            return text
        }
        return try string()
    }

    /// A single- or double-quoted Python string with `\uXXXX`, `\xXX` and one-character escapes.
    mutating func string() throws(CarrierDataError) -> [UInt8] {
        try skipSpaces()
        guard let quote = peek, quote == UInt8(ascii: "'") || quote == UInt8(ascii: "\"") else { throw fail("expected a string") }
        i += 1
        var out: [UInt8] = []
        while true {
            guard i < line.count else { throw fail("unterminated string") }
            let c = line[i]
            i += 1
            if c == quote { return out }
            if c != UInt8(ascii: "\\") { out.append(c); continue }
            guard i < line.count else { throw fail("unterminated escape") }
            let e = line[i]
            i += 1
            switch e {
            case UInt8(ascii: "u"), UInt8(ascii: "x"):
                let n = e == UInt8(ascii: "u") ? 4 : 2
                guard i + n <= line.count else { throw fail("short \\\(Character(Unicode.Scalar(e))) escape") }
                var v: UInt32 = 0
                for k in 0..<n {
                    guard let h = TextInput.hexValue(line[i + k]) else { throw fail("bad escape") }
                    v = v << 4 | UInt32(h)
                }
                i += n
                guard let scalar = Unicode.Scalar(v), v >= 0x20, !(0x7F...0x9F).contains(v), v != 0x2028, v != 0x2029 else {
                    throw fail("escape names a control character")
                }
                out += Array(String(Character(scalar)).utf8)
            case UInt8(ascii: "'"), UInt8(ascii: "\""), UInt8(ascii: "\\"):
                out.append(e)
            default:
                throw fail("unsupported escape \\\(Character(Unicode.Scalar(e)))")
            }
        }
    }
}

public enum CarrierDataError: Error, CustomStringConvertible, Equatable {
    case unreadable(String, Int32)
    case noFiles(String)
    case syntax(String, Int, String)

    public var description: String {
        switch self {
        case .unreadable(let path, let code):
            return "\(path): cannot read carrier data: \(String(cString: strerror(code))) (python3-phonenumbers provides it)"
        case .noFiles(let path):
            return "\(path): no carrier data files (data*.py) in it"
        case .syntax(let path, let line, let reason):
            return "\(path):\(line): carrier data not in the expected form: \(reason)"
        }
    }
}
