import TextFormats
import TextRules

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
        /// CSV: the columns the operator named (`--number-column` ...),
        /// and `--no-header`.
        public var columns = CSVColumnMapping()
        /// CSV: the action of rows with no action column or an empty one
        /// (`--action`); nil: a label identifies, a bare number blocks.
        public var defaultAction: CSVRowAction? = nil
        /// Leave bad lines out (each reported as a warning and counted)
        /// instead of refusing the whole compile (`--skip-invalid`).
        public var skipInvalid = false
        /// Read letters in numbers as keypad digits (`--vanity`).
        public var vanity = false
        public init() {}
    }

    /// How one source is read: `Options` says it for every source, a feed
    /// for its own lists (`number-column=` and the like on its line).
    public struct SourceOptions: Equatable, Sendable {
        public var columns = CSVColumnMapping()
        public var defaultAction: CSVRowAction? = nil
        public var skipInvalid = false
        public var vanity = false
        public init() {}
    }

    /// What the compile did besides the entries, for its summary line.
    public struct Summary: Sendable {
        /// Files recognised as a well-known export.
        public var shapes: [(file: String, shape: CSVExportShape)] = []
        /// Lines left out by `skipInvalid`.
        public var skippedLines = 0
        /// Rows of an export without any number (a contact with no phone).
        public var rowsWithoutNumber = 0
        /// Numbers whose extension was dropped.
        public var extensionsDropped = 0
        /// Vanity numbers read as digits.
        public var vanityNumbers = 0
        /// Lines giving a number (or rule) that another line gave the same data: merged.
        public var duplicatesMerged = 0
        /// Lines giving a number other data than an earlier line, the
        /// earlier one kept: `--on-duplicate first`, or a recognised export
        /// (the FTC lists a number once per complaint).
        public var conflictsKeptFirst = 0
        /// Such lines where `--on-duplicate last` kept the later one.
        public var conflictsKeptLast = 0
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
    /// Lines left out, extensions dropped and the like: not errors, but
    /// the operator should see them (the first `maxDiagnostics`).
    public private(set) var warnings: [Diagnostic] = []
    public private(set) var warningCount = 0
    public private(set) var summary = Summary()
    /// Entries read and kept (lines read, less those left out).
    public var entriesKept: Int { linesRead - summary.skippedLines }
    /// Lines refused that `skipInvalid` would have left out.
    public private(set) var rejectedLines = 0
    /// Files whose conflicting lines keep the first (recognised exports).
    private var lenientFiles = Set<UInt64>()
    /// The file being read has North American numbers (FTC data): read
    /// them with that plan. A flag, not a second normalizer in a `var`:
    /// this is read once per line.
    private var northAmericanFile = false
    /// How the file being read is read.
    private var source = SourceOptions()
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

    /// The source options `Options` gives every source.
    public var defaultSourceOptions: SourceOptions {
        var s = SourceOptions()
        s.columns = options.columns
        s.defaultAction = options.defaultAction
        s.skipInvalid = options.skipInvalid
        s.vanity = options.vanity
        return s
    }

    /// Reads one source file. Problems are recorded as diagnostics; only a
    /// file that cannot be read at all is thrown.
    public func add(path: String, source: SourceOptions? = nil) throws(DirectoryError) {
        let file = try MappedFile(path: path)
        guard let format = options.format ?? SourceFormat.guess(path: path) else {
            report(path, 0, "cannot tell the format from the file name; name it .csv, .json, .txt or .vcf, or pass --format")
            return
        }
        add(bytes: file.bytes, name: path, format: format, source: source)
    }

    /// Reads one source held in memory (`name` is used in diagnostics).
    public func add(bytes: UnsafeRawBufferPointer, name: String, format: SourceFormat, source: SourceOptions? = nil) {
        files.append(name)
        let fileIndex = UInt64(files.count - 1)
        northAmericanFile = false
        self.source = source ?? defaultSourceOptions
        // Windows "Unicode" text: read as the UTF-8 it says.
        if let converted = TextInput.utf8FromUTF16(bytes) {
            converted.withUnsafeBytes { read(TextInput.strippingBOM($0), name: name, file: fileIndex, format: format) }
            return
        }
        read(TextInput.strippingBOM(bytes), name: name, file: fileIndex, format: format)
    }

    private func read(_ input: UnsafeRawBufferPointer, name: String, file fileIndex: UInt64, format: SourceFormat) {
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

    public func add(bytes: [UInt8], name: String, format: SourceFormat, source: SourceOptions? = nil) {
        bytes.withUnsafeBytes { add(bytes: $0, name: name, format: format, source: source) }
    }

    private func report(_ file: String, _ line: Int, _ message: String) {
        diagnosticCount += 1
        if diagnostics.count < options.maxDiagnostics {
            diagnostics.append(Diagnostic(file: file, line: line, message: message))
        }
    }

    private func warn(_ file: String, _ line: Int, _ message: String) {
        warningCount += 1
        if warnings.count < options.maxDiagnostics {
            warnings.append(Diagnostic(file: file, line: line, message: message))
        }
    }

    /// A bad line: an error, or with `skipInvalid` a warning and one line
    /// left out. `counted`: the line is in `linesRead` already.
    private func reject(_ file: String, _ line: Int, _ problems: [String], counted: Bool = false) {
        if !counted { linesRead += 1 }
        guard source.skipInvalid else {
            rejectedLines += 1
            for problem in problems { report(file, line, problem) }
            return
        }
        summary.skippedLines += 1
        warn(file, line, "skipped: " + problems.joined(separator: "; "))
    }

    private func reportProgress(_ done: Int, of total: Int) {
        if let progress, total > 0 { progress("reading", Double(done) / Double(total)) }
    }

    /// Records one entry after checking all its parts; reports each problem.
    private func addEntry(number: UnsafeRawBufferPointer, action: Action?, label: UnsafeRawBufferPointer?,
                         name: String, file: UInt64, line: Int) {
        linesRead += 1
        var problems: [String] = []
        var labelID: UInt32? = nil
        if let label {
            let trimmed = trimSpaces(label)
            if !trimmed.isEmpty {
                if let problem = LabelRules.problem(trimmed) {
                    problems.append("bad label: \(problem)")
                } else {
                    labelID = labels.intern(trimmed)
                }
            }
        }
        let blocked: Bool
        switch action {
        case .block: blocked = true
        case .identify: blocked = false
        case nil:
            // No action column: a label identifies, a bare number blocks.
            blocked = labelID == nil
        }
        var key: UInt64 = 0
        let pattern = Self.needsCleaning(number)
            ? cleanedPattern(number, blocked: blocked, name: name, line: line, problems: &problems)
            : pattern(number).mapError { CompileProblem("invalid number '\(Self.printable(number))': \($0)") }
        switch pattern {
        case .success(.exact(let n)): key = n.value
        case .success(.prefix(let p)): key = 1 << 63 | DirectoryFormat.prefixKey(p)
        case .failure(let reason): problems.append(reason.message)
        }
        if action == .identify, labelID == nil, problems.isEmpty {
            problems.append("'identify' needs a label")
        }
        guard problems.isEmpty else {
            reject(name, line, problems, counted: true)
            return
        }
        pending.append(Pending(key: key, origin: file << 40 | UInt64(line),
                               value: DirectoryFormat.encodeValue(blocked: blocked, label: labelID)))
    }

    private func pattern(_ bytes: UnsafeRawBufferPointer) -> Result<NumberPattern, InvalidNumber> {
        northAmericanFile ? Self.northAmerica.pattern(bytes: bytes) : normalizer.pattern(bytes: bytes)
    }

    /// Bytes other than digits, '+', '*' and the usual separators: the
    /// field may carry an extension or letters.
    private static func needsCleaning(_ number: UnsafeRawBufferPointer) -> Bool {
        for b in number {
            switch b {
            case 0x30...0x39, 0x2B, 0x2A, 0x2D, 0x20, 0x28, 0x29, 0x2E, 0x2F: continue
            default: return true
            }
        }
        return false
    }

    /// The pattern of a number written as address books write it: an
    /// extension is dropped with a warning (calls come from the main
    /// number) when the entry only identifies, and refused when it blocks
    /// (blocking the main number blocks everyone behind it); letters are
    /// keypad digits with `vanity`, refused with that hint otherwise.
    private func cleanedPattern(_ number: UnsafeRawBufferPointer, blocked: Bool, name: String, line: Int,
                                problems: inout [String]) -> Result<NumberPattern, CompileProblem> {
        if PhoneText.isBareExtension(number) {
            return .failure(CompileProblem("'\(Self.printable(number))' is an extension without its number"))
        }
        let split = PhoneText.splitExtension(number)
        var main = split.number
        if let ext = split.extensionDigits {
            let shown = Self.printable(number)
            if blocked {
                return .failure(CompileProblem("'\(shown)' has an extension (\(Self.printable(ext))): caller ID shows the main number, and blocking it blocks every extension behind it; list the main number to do that"))
            }
            summary.extensionsDropped += 1
            warn(name, line, "'\(shown)': extension \(Self.printable(ext)) dropped (calls come from the main number \(Self.printable(main)))")
        }
        var converted: [UInt8] = []
        if PhoneText.isVanity(main) {
            converted = PhoneText.vanityDigits(main)
            let digits = String(decoding: converted, as: UTF8.self)
            guard source.vanity else {
                return .failure(CompileProblem("'\(Self.printable(main))' has letters: a vanity number? --vanity reads them as keypad digits (\(Self.printable(digits)))"))
            }
            summary.vanityNumbers += 1
            warn(name, line, "vanity number '\(Self.printable(main))' read as \(Self.printable(digits))")
        }
        return converted.withUnsafeBytes { digits in
            if !converted.isEmpty { main = digits }
            return pattern(main).mapError { CompileProblem("invalid number '\(Self.printable(number))': \($0)") }
        }
    }

    enum Action {
        case block, identify

        init(_ action: CSVRowAction) {
            switch action {
            case .block: self = .block
            case .identify: self = .identify
            }
        }
    }

    /// One bad part of a line, in the operator's words.
    struct CompileProblem: Error {
        var message: String
        init(_ message: String) { self.message = message }
    }

    /// North America's plan, for the FTC's ten-digit numbers.
    private static let northAmerica = NumberNormalizer(plan: try! NumberingPlan(countryCode: 1, nationalPrefix: "1", internationalPrefix: "011"))

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

    /// How the rows of one CSV file are read, once its header is known.
    /// A row layout of one number column and at most one label column.
    private typealias SingleColumn = (number: Int, label: Int?, action: Int?, fixed: Action?, checksWidth: Bool, allowsEmpty: Bool)

    private struct CSVPlan {
        var layout: CSVLayout
        /// Fields the header names (for the "too many fields" check).
        var width: Int
        /// The action of rows that give none.
        var defaultAction: Action?
        /// One number column and at most one label column (lookupd's own
        /// shape, named columns, FreePBX, FTC): read in place, without
        /// touching the layout's arrays on every line.
        var single: SingleColumn?

        init(layout: CSVLayout, width: Int, defaultAction: Action?) {
            self.layout = layout
            self.width = width
            self.defaultAction = defaultAction
            if layout.numberColumns.count == 1, !layout.splitsValues, layout.labelGroups.count <= 1,
               layout.labelGroups.first.map({ $0.count == 1 }) ?? true {
                single = (layout.numberColumns[0], layout.labelGroups.first?.first, layout.actionColumn,
                          layout.fixedAction.map(Action.init), !layout.ignoresExtraColumns, layout.skipsEmptyNumbers)
            }
        }
    }

    private func readCSV(_ bytes: UnsafeRawBufferPointer, name: String, file: UInt64) throws {
        // No delimiter in the first line: a single-column file (a header
        // `number` and one number per line), or an empty one.
        let delimiter = CSVDelimiter.detect(in: bytes) ?? .comma
        let mapping = source.columns
        var plan: CSVPlan? = nil
        var headerFailed = false
        let total = bytes.count
        let reader = CSVReader(bytes: bytes, delimiter: delimiter)
        // The one-column case in locals of its own: copying the plan (and
        // its arrays) for every line of a long list costs a fifth of the time.
        var single: SingleColumn? = nil
        var width = 0
        var defaultAction: Action? = nil
        try reader.forEachRecord { record in
            if plan == nil {
                if headerFailed { return }
                plan = try csvPlan(record, name: name, file: file, mapping: mapping)
                if plan == nil { headerFailed = true }
                single = plan?.single
                width = plan?.width ?? 0
                defaultAction = plan?.defaultAction
                // The first line is a header, unless the operator said there is none.
                if !mapping.noHeader || plan == nil { return }
            }
            if record.line & 0xFFFF == 0 { reportProgress(record.line, of: total / 32) }
            if let s = single {
                readSingleRow(record, s, width: width, defaultAction: defaultAction, delimiter: delimiter, name: name, file: file)
            } else {
                readCSVRow(record, plan!, delimiter: delimiter, name: name, file: file)
            }
        }
        if plan == nil && !headerFailed {
            report(name, 1, "empty file (expected a header line such as number,action,label)")
        }
    }

    /// The plan for a file from its first record: the columns the operator
    /// named, a recognised export, or lookupd's own header.
    private func csvPlan(_ first: CSVRecord, name: String, file: UInt64, mapping: CSVColumnMapping) throws -> CSVPlan? {
        let defaultAction = source.defaultAction.map(Action.init)
        let header = mapping.noHeader ? nil : first.strings
        if mapping.namesColumns {
            do {
                let layout = try CSVLayout.named(mapping, header: header, line: first.line)
                return CSVPlan(layout: layout, width: first.count, defaultAction: defaultAction)
            } catch let error as TextFormatError {
                report(name, error.line, error.message)
                return nil
            }
        }
        guard let header else {
            // No header and no names: lookupd's own order.
            var layout = CSVLayout(numberColumns: [0], labelGroups: [[2]], actionColumn: 1)
            layout.ignoresExtraColumns = false
            return CSVPlan(layout: layout, width: 3, defaultAction: defaultAction)
        }
        if let recognised = CSVExportShape.recognize(header), let shape = recognised.shape {
            summary.shapes.append((name, shape))
            lenientFiles.insert(file)
            if shape.isNorthAmerican { northAmericanFile = true }
            return CSVPlan(layout: recognised, width: header.count, defaultAction: Action(shape.action))
        }
        guard let columns = parseHeader(first, name: name) else { return nil }
        var layout = CSVLayout(numberColumns: [columns.number], labelGroups: columns.label.map { [[$0]] } ?? [],
                               actionColumn: columns.action)
        layout.ignoresExtraColumns = false
        return CSVPlan(layout: layout, width: columns.width, defaultAction: defaultAction)
    }

    private func readCSVRow(_ record: CSVRecord, _ p: CSVPlan, delimiter: CSVDelimiter, name: String, file: UInt64) {
        let layout = p.layout
        var action: Action? = p.defaultAction
        if let a = layout.actionColumn, a < record.count, !CSVLayout.isBlank(record[a]) {
            guard let parsed = parseAction(record[a]) else {
                reject(name, record.line, ["unknown action '\(Self.printable(record[a]))' (expected block or identify)"])
                return
            }
            action = parsed ?? action
        }
        if let fixed = layout.fixedAction { action = Action(fixed) }
        if !layout.ignoresExtraColumns, CSVLayout.hasExtraFields(record, width: p.width) {
            reject(name, record.line, ["\(record.count) fields, the header names \(p.width) (a label with an unquoted '\(Character(Unicode.Scalar(delimiter.rawValue)))'?)"])
            return
        }
        if layout.numberColumns.count == 1, !layout.splitsValues {
            // lookupd's own shape, or one named column: no copies.
            let c = layout.numberColumns[0]
            guard c < record.count, !CSVLayout.isBlank(record[c]) else {
                noNumber(record, c, skipped: layout.skipsEmptyNumbers, name: name)
                return
            }
            layout.withLabel(record) { label in
                addEntry(number: record[c], action: action, label: label, name: name, file: file, line: record.line)
            }
            return
        }
        let numbers = layout.numbers(record)
        guard !numbers.isEmpty else {
            summary.rowsWithoutNumber += 1
            return
        }
        layout.withLabel(record) { label in
            for number in numbers {
                addEntry(number: number, action: action, label: label, name: name, file: file, line: record.line)
            }
        }
    }

    /// `readCSVRow` for one number column: this runs once per line of a
    /// ten-million-line list, so nothing here allocates or copies.
    private func readSingleRow(_ record: CSVRecord, _ s: SingleColumn, width: Int, defaultAction: Action?,
                               delimiter: CSVDelimiter, name: String, file: UInt64) {
        var action: Action? = defaultAction
        if let a = s.action, a < record.count, !CSVLayout.isBlank(record[a]) {
            guard let parsed = parseAction(record[a]) else {
                reject(name, record.line, ["unknown action '\(Self.printable(record[a]))' (expected block or identify)"])
                return
            }
            action = parsed ?? action
        }
        if let fixed = s.fixed { action = fixed }
        if s.checksWidth, CSVLayout.hasExtraFields(record, width: width) {
            reject(name, record.line, ["\(record.count) fields, the header names \(width) (a label with an unquoted '\(Character(Unicode.Scalar(delimiter.rawValue)))'?)"])
            return
        }
        let c = s.number
        guard c < record.count, !CSVLayout.isBlank(record[c]) else {
            noNumber(record, c, skipped: s.allowsEmpty, name: name)
            return
        }
        var label: UnsafeRawBufferPointer? = nil
        if let l = s.label, l < record.count, !CSVLayout.isBlank(record[l]) { label = record[l] }
        addEntry(number: record[c], action: action, label: label, name: name, file: file, line: record.line)
    }

    /// A row whose number field `c` is empty or missing: counted where the
    /// layout skips such rows (exports), otherwise a bad line.
    private func noNumber(_ record: CSVRecord, _ c: Int, skipped: Bool, name: String) {
        if skipped {
            summary.rowsWithoutNumber += 1
        } else {
            reject(name, record.line, [c < record.count ? "empty number field" : "missing number field"])
        }
    }

    private func parseHeader(_ record: CSVRecord, name: String) -> (number: Int, action: Int?, label: Int?, width: Int)? {
        var number: Int? = nil, action: Int? = nil, label: Int? = nil
        // A trailing delimiter leaves empty names at the end: not columns.
        var width = record.count
        while width > 1, CSVLayout.isBlank(record[width - 1]) { width -= 1 }
        for i in 0..<width {
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
                    report(name, record.line, "missing header line (expected for example: number,action,label; or pass --no-header)")
                } else {
                    report(name, record.line, "unknown column '\(Self.printable(field))' in the header (expected number, action, label; or name the columns with --number-column, --label-column, --action-column)")
                }
                return nil
            }
        }
        guard let number else {
            report(name, record.line, "the header has no 'number' column (name it with --number-column)")
            return nil
        }
        return (number, action, label, width)
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
                reject(name, line, ["expected an object with number, action and label"])
                return
            }
            var number: String? = nil
            var action: Action? = nil
            var label: String? = nil
            var problems: [String] = []
            for (key, member) in members {
                switch key {
                case "number", "phoneNum", "phone":
                    switch member {
                    case .string(let s): number = s
                    case .number(let lexeme): number = lexeme
                    default: problems.append("'\(key)' must be a string")
                    }
                case "action":
                    guard case .string(let text) = member else { problems.append("'action' must be a string"); continue }
                    var s = text
                    guard let parsed = s.withUTF8({ parseAction(UnsafeRawBufferPointer($0)) }) else {
                        problems.append("unknown action '\(Self.printable(text))' (expected block or identify)")
                        continue
                    }
                    action = parsed
                case "label", "typeName":
                    switch member {
                    case .string(let s): label = s
                    case .null: break
                    default: problems.append("'\(key)' must be a string")
                    }
                default:
                    problems.append("unknown field '\(Self.printable(key))' (expected number, action, label; or phoneNum, typeName)")
                }
            }
            guard problems.isEmpty else {
                reject(name, line, problems)
                return
            }
            guard var number else {
                reject(name, line, ["object has no 'number' (or 'phoneNum')"])
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
                reject(name, card.line, ["card has no name (FN or N) to label its numbers with"])
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
            for k in (i + 1)..<j {
                guard pending[k].value != pending[i].value else {
                    summary.duplicatesMerged += 1
                    continue
                }
                switch options.onDuplicate {
                case .error:
                    let a = pending[i], b = pending[k]
                    let line = Int(b.origin & 0xFF_FFFF_FFFF)
                    if lenientFiles.contains(a.origin >> 40), lenientFiles.contains(b.origin >> 40) {
                        // An export lists a number once per complaint (or
                        // contact): the first row decides, as for feeds.
                        summary.conflictsKeptFirst += 1
                        warn(fileName(b.origin), line, "\(describeKey(a.key)) again (\(describeValue(b.value))): \(fileName(a.origin)):\(a.origin & 0xFF_FFFF_FFFF) kept (\(describeValue(a.value)))")
                        continue
                    }
                    report(fileName(b.origin), line,
                           "\(describeKey(a.key)) conflicts with \(fileName(a.origin)):\(a.origin & 0xFF_FFFF_FFFF) (\(describeValue(b.value)) here, \(describeValue(a.value)) there); use --on-duplicate first|last to choose")
                case .first: summary.conflictsKeptFirst += 1
                case .last: chosen = pending[k]; summary.conflictsKeptLast += 1
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
