import TextFormats

/// What to do when two source lines give the same number different data.
public enum DuplicatePolicy: String, Sendable, CaseIterable {
    /// Refuse to compile, naming both lines.
    case error
    /// Keep the line read first (files in command-line order, lines in order).
    case first
    /// Keep the line read last.
    case last
}

/// Turns directory sources into `DirectoryContent`.
///
/// Validation is all-or-nothing: every bad line is reported as a
/// `Diagnostic`, and `finish()` only yields content when there were none.
/// Threading: one compiler per thread.
public final class DirectoryCompiler {
    public struct Options: Sendable {
        public var plan: NumberingPlan = .china
        public var onDuplicate: DuplicatePolicy = .error
        public var directoryVersion: UInt64 = 0
        /// Overrides the format guessed from each file's extension.
        public var format: SourceFormat? = nil
        /// Diagnostics kept in memory; the rest are only counted.
        public var maxDiagnostics = 1000
        public init() {}
    }

    /// Called with a phase name and the fraction done, for a progress bar.
    public typealias Progress = (_ phase: String, _ fraction: Double) -> Void

    struct Pending {
        /// Exact: the number. Prefix: bit 63 set, length in bits 56...59.
        var key: UInt64
        /// File number in the high 24 bits, line in the low 40: orders
        /// entries as they were read, for `--on-duplicate`.
        var origin: UInt64
        /// Value word with the interner's label number.
        var value: UInt32
    }

    public let options: Options
    public private(set) var diagnostics: [Diagnostic] = []
    public private(set) var diagnosticCount = 0
    public private(set) var linesRead = 0
    private var pending: [Pending] = []
    private let labels = LabelInterner()
    private var files: [String] = []
    private let normalizer: NumberNormalizer
    private let progress: Progress?

    public init(options: Options = Options(), progress: Progress? = nil) {
        self.options = options
        self.normalizer = NumberNormalizer(plan: options.plan)
        self.progress = progress
    }

    // MARK: - Reading sources

    /// Reads one source file. Problems are recorded as diagnostics; only a
    /// file that cannot be read at all is thrown.
    public func add(path: String) throws(DirectoryError) {
        let file = try MappedFile(path: path)
        guard let format = options.format ?? SourceFormat.guess(path: path) else {
            report(path, 0, "cannot tell the format from the file name; name it .csv, .json, .txt or .vcf, or pass --format")
            return
        }
        add(bytes: file.bytes, name: path, format: format)
    }

    /// Reads one source held in memory (`name` is used in diagnostics).
    public func add(bytes: UnsafeRawBufferPointer, name: String, format: SourceFormat) {
        files.append(name)
        let fileIndex = UInt64(files.count - 1)
        let input = TextInput.strippingBOM(bytes)
        do {
            switch format {
            case .csv: try readCSV(input, name: name, file: fileIndex)
            case .json: try readJSON(input, name: name, file: fileIndex)
            case .text: try readText(input, name: name, file: fileIndex)
            case .vcard: try readVCard(input, name: name, file: fileIndex)
            }
        } catch let error as TextFormatError {
            report(name, error.line, error.message)
        } catch {
            report(name, 0, "\(error)")
        }
    }

    public func add(bytes: [UInt8], name: String, format: SourceFormat) {
        bytes.withUnsafeBytes { add(bytes: $0, name: name, format: format) }
    }

    private func report(_ file: String, _ line: Int, _ message: String) {
        diagnosticCount += 1
        if diagnostics.count < options.maxDiagnostics {
            diagnostics.append(Diagnostic(file: file, line: line, message: message))
        }
    }

    private func reportProgress(_ done: Int, of total: Int) {
        if let progress, total > 0 { progress("reading", Double(done) / Double(total)) }
    }

    /// Records one entry after checking all its parts; reports each problem.
    private func addEntry(number: UnsafeRawBufferPointer, action: Action?, label: UnsafeRawBufferPointer?,
                         name: String, file: UInt64, line: Int) {
        linesRead += 1
        var ok = true
        var key: UInt64 = 0
        switch normalizer.pattern(bytes: number) {
        case .success(.exact(let n)): key = n.value
        case .success(.prefix(let p)): key = 1 << 63 | DirectoryFormat.prefixKey(p)
        case .failure(let reason):
            report(name, line, "invalid number '\(Self.printable(number))': \(reason)")
            ok = false
        }
        var labelID: UInt32? = nil
        if let label {
            let trimmed = trimSpaces(label)
            if !trimmed.isEmpty {
                if let problem = LabelRules.problem(trimmed) {
                    report(name, line, "bad label: \(problem)")
                    ok = false
                } else {
                    labelID = labels.intern(trimmed)
                }
            }
        }
        let blocked: Bool
        switch action {
        case .block: blocked = true
        case .identify:
            blocked = false
            if labelID == nil && ok {
                report(name, line, "'identify' needs a label")
                ok = false
            }
        case nil:
            // No action column: a label identifies, a bare number blocks.
            blocked = labelID == nil
        }
        guard ok else { return }
        pending.append(Pending(key: key, origin: file << 40 | UInt64(line),
                               value: DirectoryFormat.encodeValue(blocked: blocked, label: labelID)))
    }

    enum Action { case block, identify }

    private static let actionWords: [(word: [UInt8], action: Action)] =
        ["block", "blocked", "b", "reject", "deny"].map { (Array($0.utf8), Action.block) }
        + ["identify", "identified", "i", "label", "id"].map { (Array($0.utf8), Action.identify) }

    /// nil: not an action word; .some(nil): empty (no action given).
    private func parseAction(_ bytes: UnsafeRawBufferPointer) -> Action?? {
        let text = trimSpaces(bytes)
        if text.isEmpty { return .some(nil) }
        // Compared in place, case-insensitively: this runs once per source line.
        outer: for candidate in Self.actionWords where candidate.word.count == text.count {
            for i in 0..<text.count where lowercase(text[i]) != candidate.word[i] { continue outer }
            return .some(candidate.action)
        }
        return nil
    }

    // MARK: CSV

    private func readCSV(_ bytes: UnsafeRawBufferPointer, name: String, file: UInt64) throws {
        // No delimiter in the first line: a single-column file (a header
        // `number` and one number per line), or an empty one.
        let delimiter = CSVDelimiter.detect(in: bytes) ?? .comma
        var columns: (number: Int, action: Int?, label: Int?)? = nil
        var headerFailed = false
        let total = bytes.count
        let reader = CSVReader(bytes: bytes, delimiter: delimiter)
        try reader.forEachRecord { record in
            if columns == nil {
                if headerFailed { return }
                columns = parseHeader(record, name: name)
                if columns == nil { headerFailed = true }
                return
            }
            let c = columns!
            if record.line & 0xFFFF == 0 { reportProgress(record.line, of: total / 32) }
            guard record.count >= c.number + 1 else {
                report(name, record.line, "missing number field")
                return
            }
            var action: Action? = nil
            if let a = c.action, a < record.count {
                guard let parsed = parseAction(record[a]) else {
                    report(name, record.line, "unknown action '\(Self.printable(record[a]))' (expected block or identify)")
                    return
                }
                action = parsed
            }
            let label: UnsafeRawBufferPointer? = c.label.flatMap { $0 < record.count ? record[$0] : nil }
            let maxColumn = max(c.number, c.action ?? 0, c.label ?? 0)
            if record.count > maxColumn + 1 {
                report(name, record.line, "\(record.count) fields, the header names \(maxColumn + 1) (a label with an unquoted '\(Character(Unicode.Scalar(delimiter.rawValue)))'?)")
                return
            }
            addEntry(number: record[c.number], action: action, label: label, name: name, file: file, line: record.line)
        }
        if columns == nil && !headerFailed {
            report(name, 1, "empty file (expected a header line such as number,action,label)")
        }
    }

    private func parseHeader(_ record: CSVRecord, name: String) -> (number: Int, action: Int?, label: Int?)? {
        var number: Int? = nil, action: Int? = nil, label: Int? = nil
        for i in 0..<record.count {
            let field = record.string(i).trimmingSpaces().lowercased()
            switch field {
            case "number", "phone", "phonenumber", "phonenum", "tel", "caller":
                number = i
            case "action", "type", "verdict":
                action = i
            case "label", "name", "typename", "description":
                label = i
            default:
                if i == 0, normalizer.pattern(record.string(i)).isSuccess {
                    report(name, record.line, "missing header line (expected for example: number,action,label)")
                } else {
                    report(name, record.line, "unknown column '\(field)' in the header (expected number, action, label)")
                }
                return nil
            }
        }
        guard let number else {
            report(name, record.line, "the header has no 'number' column")
            return nil
        }
        return (number, action, label)
    }

    // MARK: Plain text

    private func readText(_ bytes: UnsafeRawBufferPointer, name: String, file: UInt64) throws {
        let total = bytes.count
        try LineListReader(bytes: bytes).forEachItem { line, item in
            if line & 0xFFFF == 0 { reportProgress(line, of: total / 16) }
            addEntry(number: item, action: .block, label: nil, name: name, file: file, line: line)
        }
    }

    // MARK: JSON

    private func readJSON(_ bytes: UnsafeRawBufferPointer, name: String, file: UInt64) throws {
        try JSONValue.forEachRecord(in: bytes) { line, value in
            guard case .object(let members) = value else {
                report(name, line, "expected an object with number, action and label")
                return
            }
            var number: String? = nil
            var action: Action? = nil
            var label: String? = nil
            var bad = false
            for (key, member) in members {
                switch key {
                case "number", "phoneNum", "phone":
                    switch member {
                    case .string(let s): number = s
                    case .number(let lexeme): number = lexeme
                    default: report(name, line, "'\(key)' must be a string"); bad = true
                    }
                case "action":
                    guard case .string(let text) = member else { report(name, line, "'action' must be a string"); bad = true; continue }
                    var s = text
                    guard let parsed = s.withUTF8({ parseAction(UnsafeRawBufferPointer($0)) }) else {
                        report(name, line, "unknown action '\(Self.printable(text))' (expected block or identify)")
                        bad = true
                        continue
                    }
                    action = parsed
                case "label", "typeName":
                    switch member {
                    case .string(let s): label = s
                    case .null: break
                    default: report(name, line, "'\(key)' must be a string"); bad = true
                    }
                default:
                    report(name, line, "unknown field '\(Self.printable(key))' (expected number, action, label; or phoneNum, typeName)")
                    bad = true
                }
            }
            guard !bad else { return }
            guard var number else {
                report(name, line, "object has no 'number' (or 'phoneNum')")
                return
            }
            number.withUTF8 { numberBytes in
                if var label {
                    label.withUTF8 { labelBytes in
                        addEntry(number: UnsafeRawBufferPointer(numberBytes), action: action, label: UnsafeRawBufferPointer(labelBytes),
                                 name: name, file: file, line: line)
                    }
                } else {
                    addEntry(number: UnsafeRawBufferPointer(numberBytes), action: action, label: nil, name: name, file: file, line: line)
                }
            }
        }
    }

    // MARK: vCard

    private func readVCard(_ bytes: UnsafeRawBufferPointer, name: String, file: UInt64) throws {
        for card in try VCard.parse(bytes) {
            guard var label = card.displayName, !label.isEmpty else {
                report(name, card.line, "card has no name (FN or N) to label its numbers with")
                continue
            }
            for tel in card.telephones {
                var number = tel.number
                number.withUTF8 { n in
                    label.withUTF8 { l in
                        addEntry(number: UnsafeRawBufferPointer(n), action: .identify, label: UnsafeRawBufferPointer(l),
                                 name: name, file: file, line: tel.line)
                    }
                }
            }
        }
    }

    // MARK: - Finishing

    /// Sorts, resolves duplicates and builds the content; fails with every
    /// diagnostic when any source line was bad.
    public func finish() -> Result<DirectoryContent, CompileFailure> {
        progress?("sorting", 0)
        pending.sort { ($0.key, $0.origin) < ($1.key, $1.origin) }
        progress?("sorting", 1)

        var kept = [Pending]()
        kept.reserveCapacity(pending.count)
        var i = 0
        while i < pending.count {
            var j = i + 1
            while j < pending.count, pending[j].key == pending[i].key { j += 1 }
            var chosen = pending[i]
            for k in (i + 1)..<j where pending[k].value != pending[i].value {
                switch options.onDuplicate {
                case .error:
                    let a = pending[i], b = pending[k]
                    report(fileName(b.origin), Int(b.origin & 0xFF_FFFF_FFFF),
                           "\(describeKey(a.key)) conflicts with \(fileName(a.origin)):\(a.origin & 0xFF_FFFF_FFFF) (\(describeValue(b.value)) here, \(describeValue(a.value)) there); use --on-duplicate first|last to choose")
                case .first: break
                case .last: chosen = pending[k]
                }
            }
            if options.onDuplicate == .last { chosen = pending[j - 1] }
            kept.append(chosen)
            i = j
        }
        if diagnosticCount > 0 {
            return .failure(CompileFailure(diagnostics: diagnostics.sorted(by: Self.ordered), total: diagnosticCount))
        }
        pending = []

        // Only labels still in use, in byte order, so the same entries always
        // give the same file (compile -> export -> compile is identical).
        var used = [Bool](repeating: false, count: labels.count)
        for entry in kept where entry.value >> 1 != 0 { used[Int(entry.value >> 1) - 1] = true }
        let order = labels.sortedIDs((0..<labels.count).filter { used[$0] })
        var remap = [UInt32](repeating: 0, count: labels.count)
        var content = DirectoryContent()
        content.directoryVersion = options.directoryVersion
        content.labels.reserveCapacity(order.count)
        for (newID, oldID) in order.enumerated() {
            remap[oldID] = UInt32(newID)
            content.labels.append(Array(labels.bytes(oldID)))
        }
        content.exactKeys.reserveCapacity(kept.count)
        content.exactValues.reserveCapacity(kept.count)
        for entry in kept {
            var value = entry.value & 1
            if entry.value >> 1 != 0 { value |= (remap[Int(entry.value >> 1) - 1] + 1) << 1 }
            if entry.key >> 63 == 0 {
                content.exactKeys.append(entry.key)
                content.exactValues.append(value)
            } else {
                content.prefixKeys.append(entry.key & ~(1 << 63))
                content.prefixValues.append(value)
            }
        }
        return .success(content)
    }

    private func fileName(_ origin: UInt64) -> String { files[Int(origin >> 40)] }

    private func describeKey(_ key: UInt64) -> String {
        if key >> 63 == 0 { return "+\(key)" }
        let digits = key & ((1 << 56) - 1)
        return "+\(digits)*"
    }

    private func describeValue(_ value: UInt32) -> String {
        var parts: [String] = []
        if value & 1 != 0 { parts.append("block") }
        if value >> 1 != 0 { parts.append("label '\(String(decoding: labels.bytes(Int(value >> 1) - 1), as: UTF8.self))'") }
        return parts.joined(separator: " with ")
    }

    private static func ordered(_ a: Diagnostic, _ b: Diagnostic) -> Bool {
        (a.file, a.line) < (b.file, b.line)
    }

    /// Text from a source shown in a message: control characters escaped and
    /// long values cut, so a message is always one readable line.
    static func printable(_ bytes: UnsafeRawBufferPointer) -> String {
        printable(String(decoding: bytes, as: UTF8.self))
    }

    static func printable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(60) {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        if text.unicodeScalars.count > 60 { out += "..." }
        return out
    }
}

/// Compilation refused: the diagnostics kept (sorted by file and line) and
/// how many there were in all.
public struct CompileFailure: Error, Sendable {
    public var diagnostics: [Diagnostic]
    public var total: Int
}

extension Result {
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
