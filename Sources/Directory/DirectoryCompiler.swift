import Glibc
import SystemCalls
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
        /// The directory format written: 4, or 2 (binary order) for older readers.
        public var fileFormat: UInt32 = DirectoryFormat.version
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
        /// Bytes the compile may hold (`--memory`). With `temporaryFolder`
        /// set, entries beyond what fits are sorted in runs written there
        /// and merged (an external sort), so memory does not grow with the
        /// input; without it everything is held in memory, 16 bytes a line.
        public var memoryBudget = DirectoryCompiler.defaultMemoryBudget
        /// Where the temporary folder of sorted runs is made (beside the
        /// output, so that it is on a file system with room for it); nil:
        /// in memory only.
        public var temporaryFolder: String? = nil
        public init() {}
    }

    /// An eighth of the memory this machine (or its cgroup) has, at least
    /// 256 MiB: a compile of any size stays within it, and leaves the rest
    /// to the daemon serving directories and to the page cache.
    public static var defaultMemoryBudget: Int {
        var physical = Int(sysconf(Int32(_SC_PHYS_PAGES))) &* Int(sysconf(Int32(_SC_PAGESIZE)))
        if let limit = cgroupMemoryLimit(), limit < physical { physical = limit }
        return max(256 << 20, physical / 8)
    }

    private static func cgroupMemoryLimit() -> Int? {
        guard let bytes = try? readRegularFile("/sys/fs/cgroup/memory.max", maxBytes: 64) else { return nil }
        return Int(String(decoding: bytes, as: UTF8.self).trimmingSpaces().filter { $0 != "\n" })
    }

    /// Parses a size such as 2G, 512M, 1.5G or a number of bytes.
    public static func parseMemory(_ text: String) -> Int? {
        let units: [Character: Double] = ["K": 1024, "M": 1024 * 1024, "G": 1024 * 1024 * 1024, "T": 1024 * 1024 * 1024 * 1024]
        var digits = Substring(text.trimmingSpaces())
        var scale = 1.0
        if digits.hasSuffix("B") || digits.hasSuffix("b") { digits = digits.dropLast() }
        if let last = digits.last, let unit = units[Character(last.uppercased())] {
            scale = unit
            digits = digits.dropLast()
        }
        guard let value = Double(digits), value > 0, value * scale < 1e18 else { return nil }
        return Int(value * scale)
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


    public let options: Options
    public private(set) var diagnostics: [Diagnostic] = []
    public private(set) var diagnosticCount = 0
    @exclusivity(unchecked) public private(set) var linesRead = 0
    /// Lines left out, extensions dropped and the like: not errors, but
    /// the operator should see them (the first `maxDiagnostics`).
    public private(set) var warnings: [Diagnostic] = []
    public private(set) var warningCount = 0
    @exclusivity(unchecked) public private(set) var summary = Summary()
    /// Entries read and kept (lines read, less those left out).
    public var entriesKept: Int { linesRead - summary.skippedLines }
    /// Lines refused that `skipInvalid` would have left out.
    @exclusivity(unchecked) public private(set) var rejectedLines = 0
    /// Files whose conflicting lines keep the first (recognised exports).
    private var lenientFiles = Set<UInt64>()
    /// The file being read has North American numbers (FTC data): read
    /// them with that plan. A flag, not a second normalizer in a `var`:
    /// this is read once per line.
    @exclusivity(unchecked) private var northAmericanFile = false
    /// How the file being read is read.
    @exclusivity(unchecked) private var source = SourceOptions()
    /// Exact numbers kept although their country's plan holds no range for them.
    @exclusivity(unchecked) public private(set) var notInPlanCount = 0
    /// The entries read, on their way to be sorted. A key is the number,
    /// or for a prefix rule bit 63 set and the length in bits 56...59;
    /// the origin is the file's base plus the line (`files`), so origins
    /// ascend in reading order, which decides `--on-duplicate`.
    private let sorter: EntrySorter
    private let labels = LabelInterner()
    /// The sources in the order read, each with the origin of its line 0.
    @exclusivity(unchecked) private var files: [(name: String, base: UInt64)] = []
    /// The highest line an entry came from in the file being read.
    @exclusivity(unchecked) private var lastLine = 0
    /// A failure writing the sorted runs: the compile cannot finish.
    @exclusivity(unchecked) private var sortFailure: DirectoryError? = nil
    private let normalizer: NumberNormalizer
    /// `normalizer`'s short way for home numbers in E.164 form, held apart
    /// from it (a plain value, read on every line).
    private let homeCanonical: CanonicalHomeReader?
    private let progress: Progress?

    public init(options: Options = Options(), progress: Progress? = nil) {
        self.options = options
        self.normalizer = NumberNormalizer(plan: options.plan)
        homeCanonical = normalizer.canonical
        self.progress = progress
        // Two buffers of 16 bytes an entry (the radix sort's source and
        // target); the labels and the rest get a quarter of the budget.
        sorter = EntrySorter(capacity: options.memoryBudget * 3 / 4 / 32, folder: options.temporaryFolder)
    }

    deinit { pending.deallocate() }

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
        // Opened first: a missing file is an error whatever its name.
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC) } catch {
            throw .system(path: path, operation: "open", errno: error.rawValue)
        }
        defer { fd.close() }
        if let status = try? fd.status(), status.isDirectory { throw .system(path: path, operation: "read", errno: EISDIR) }
        guard let format = options.format ?? SourceFormat.guess(path: path) else {
            report(path, 0, "cannot tell the format from the file name; name it .csv, .json, .txt or .vcf, or pass --format")
            return
        }
        try add(descriptor: fd, name: path, format: format, source: source)
    }

    /// Reads one source from an open descriptor: a file, or a pipe such as
    /// standard input (`lookupd compile -`). CSV and text are read in
    /// pieces of a few MiB, so a source of any length costs no more memory
    /// than its entries do; JSON, vCard and UTF-16 text are read whole.
    public func add(descriptor fd: FileDescriptor, name: String, format: SourceFormat, source: SourceOptions? = nil) throws(DirectoryError) {
        let status: FileStatus
        do { status = try fd.status() } catch { throw .system(path: name, operation: "stat", errno: error.rawValue) }
        if status.isDirectory { throw .system(path: name, operation: "read", errno: EISDIR) }
        let fileIndex = beginFile(name)
        self.source = source ?? defaultSourceOptions
        var input = SourceStream(fd: fd, name: name, size: status.isRegular ? Int(status.size) : nil)
        defer { input.close() }
        try input.fill()
        let start = input.available
        let utf16 = start.count >= 2 && ((start[0] == 0xFF && start[1] == 0xFE) || (start[0] == 0xFE && start[1] == 0xFF))
        guard format == .csv || format == .text, !utf16 else {
            let whole = try input.readAll()
            whole.withUnsafeBytes { readWhole($0, name: name, file: fileIndex, format: format) }
            return
        }
        input.skipBOM()
        let piece = PieceReader(format: format)
        while true {
            guard let bytes = try input.nextPiece() else { break }
            let consumed = readPiece(bytes, piece, name: name, file: fileIndex, more: !input.isLastPiece)
            guard let consumed else { return }
            input.consume(consumed)
            if let size = input.size, size > 0 { progress?("reading", Double(input.consumedTotal) / Double(size)) }
        }
        finishPieces(piece, name: name)
    }

    /// Reads one source held in memory (`name` is used in diagnostics).
    public func add(bytes: UnsafeRawBufferPointer, name: String, format: SourceFormat, source: SourceOptions? = nil) {
        let fileIndex = beginFile(name)
        self.source = source ?? defaultSourceOptions
        readWhole(bytes, name: name, file: fileIndex, format: format)
    }

    /// A whole source in memory, UTF-16 or UTF-8.
    private func readWhole(_ bytes: UnsafeRawBufferPointer, name: String, file fileIndex: UInt64, format: SourceFormat) {
        // Windows "Unicode" text: read as the UTF-8 it says.
        if let converted = TextInput.utf8FromUTF16(bytes) {
            converted.withUnsafeBytes { read($0, name: name, file: fileIndex, format: format) }
            return
        }
        read(bytes, name: name, file: fileIndex, format: format)
    }

    /// Registers a source; its lines' origins start after the last file's.
    private func beginFile(_ name: String) -> UInt64 {
        let base = files.last.map { $0.base + UInt64(lastLine) + 1 } ?? 0
        files.append((name, base))
        lastLine = 0
        northAmericanFile = false
        return UInt64(files.count - 1)
    }

    /// A whole source, as read (a BOM still in front).
    private func read(_ bytes: UnsafeRawBufferPointer, name: String, file fileIndex: UInt64, format: SourceFormat) {
        let input = TextInput.strippingBOM(bytes)
        switch format {
        case .csv, .text:
            let piece = PieceReader(format: format)
            if readPiece(input, piece, name: name, file: fileIndex, more: false) != nil { finishPieces(piece, name: name) }
            return
        case .json, .vcard:
            break
        }
        if DirectoryCompiler.isBlank(input) {
            warn(name, 0, "empty file: no entries")
            return
        }
        do {
            if format == .json { try readJSON(input, name: name, file: fileIndex) } else { try readVCard(input, name: name, file: fileIndex) }
        } catch let error as TextFormatError {
            report(name, error.line, error.message)
        } catch {
            report(name, 0, "\(error)")
        }
    }

    /// Where reading a CSV or text source has got to, between pieces.
    private final class PieceReader {
        let format: SourceFormat
        var line = 1
        var started = false
        var delimiter = CSVDelimiter.comma
        var plan: CSVPlan? = nil
        var headerFailed = false
        // The one-column case in fields of its own: copying the plan (and
        // its arrays) for every line of a long list costs a fifth of the time.
        var single: SingleColumn? = nil
        var width = 0
        var defaultAction: Action? = nil
        // Only blanks so far: an empty source is a list with nothing on it.
        var blank = true

        init(format: SourceFormat) { self.format = format }
    }

    /// Reads a piece of a source (ending at a line feed unless it is the
    /// last); returns the bytes consumed, nil when an error ended the source.
    private func readPiece(_ bytes: UnsafeRawBufferPointer, _ piece: PieceReader, name: String, file: UInt64, more: Bool) -> Int? {
        if piece.blank, !DirectoryCompiler.isBlank(bytes) { piece.blank = false }
        heldPiece = bytes.baseAddress == nil ? nil : bytes
        defer {
            flushPending()
            heldPiece = nil
        }
        do {
            if piece.format == .text {
                piece.line = try LineListReader(bytes: bytes).forEachItem(firstLine: piece.line) { line, item in
                    // A plain list blocks, or with `--action allow` allows, every number on it.
                    addEntry(number: item, action: source.defaultAction == .allow ? .allow : .block, label: nil, name: name, file: file, line: line)
                }
                return bytes.count
            }
            return try readCSV(bytes, piece, name: name, file: file, more: more)
        } catch let error as TextFormatError {
            report(name, error.line, error.message)
        } catch {
            report(name, 0, "\(error)")
        }
        return nil
    }

    private func finishPieces(_ piece: PieceReader, name: String) {
        // An empty source is a list with nothing on it (a feed's first day, a
        // blocklist cleared out), not a mistake: worth a word, not a refusal.
        if piece.blank {
            warn(name, 0, "empty file: no entries")
            return
        }
        if piece.format == .csv, piece.plan == nil, !piece.headerFailed {
            report(name, 1, "empty file (expected a header line such as number,action,label)")
        }
    }

    private static func isBlank(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
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

    /// Records one entry after checking all its parts; reports each problem.
    private func addEntry(number: UnsafeRawBufferPointer, action: Action?, label: UnsafeRawBufferPointer?,
                         name: String, file: UInt64, line: Int) {
        linesRead += 1
        var problems: [String] = []
        // The label is interned after the number is read: its table slot,
        // prefetched now, is then in the cache (`LabelInterner`).
        var goodLabel: UnsafeRawBufferPointer? = nil
        var labelHash = 0
        if let label {
            let trimmed = trimSpaces(label)
            if !trimmed.isEmpty {
                if let problem = LabelRules.problem(trimmed) {
                    problems.append("bad label: \(problem)")
                } else {
                    goodLabel = trimmed
                    labelHash = LabelInterner.hash(trimmed)
                    labels.prefetch(hash: labelHash)
                }
            }
        }
        let blocked: Bool
        switch action {
        case .block: blocked = true
        case .identify, .allow: blocked = false
        case nil:
            // No action column: a label identifies, a bare number blocks.
            blocked = goodLabel == nil
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
        if action == .identify, goodLabel == nil, problems.isEmpty {
            problems.append("'identify' needs a label")
        }
        guard problems.isEmpty else {
            reject(name, line, problems, counted: true)
            return
        }
        guard sortFailure == nil else { return }
        if line > lastLine { lastLine = line }
        let slot = pendingEnd & (Self.pendingSize - 1)
        pending[slot] = Pending(label: goodLabel, hash: labelHash, key: key, origin: files[Int(file)].base + UInt64(line),
                                blocked: blocked, allowed: action == .allow)
        pendingEnd += 1
        // Halfway along, the label's table slot has arrived: fetch its record.
        let halfway = pendingEnd - 1 - Self.pendingSize / 2
        if halfway >= pendingStart, pending[halfway & (Self.pendingSize - 1)].label != nil {
            labels.prefetchRecord(hash: pending[halfway & (Self.pendingSize - 1)].hash)
        }
        if !holds(goodLabel) {
            flushPending()
        } else if pendingEnd - pendingStart == Self.pendingSize {
            completeOldest()
        }
    }

    /// An entry read and checked, its label not interned yet.
    private struct Pending {
        var label: UnsafeRawBufferPointer?
        var hash: Int
        var key: UInt64
        var origin: UInt64
        var blocked: Bool
        var allowed: Bool
    }

    /// Entries wait here, in reading order, for `pendingSize` lines while a
    /// CSV or text piece is read: the label table slot of each is prefetched
    /// when it arrives, its record halfway along, and it is interned (and the
    /// entry sorted) at the end, when both are in the cache. Interning at once
    /// waited for two cache misses a line, a third of the compile's time at
    /// 10^7 lines with 10^5 labels. The labels point into the piece, so the
    /// piece's reader empties the queue before it returns (`readPiece`); the
    /// other formats, and labels that live only while their line is read,
    /// empty it at once (`holds`).
    private static let pendingSize = 16
    private let pending = UnsafeMutablePointer<Pending>.allocate(capacity: DirectoryCompiler.pendingSize)
    @exclusivity(unchecked) private var pendingStart = 0
    @exclusivity(unchecked) private var pendingEnd = 0
    /// The piece being read, while entries whose labels lie in it may wait.
    @exclusivity(unchecked) private var heldPiece: UnsafeRawBufferPointer? = nil

    /// Whether an entry of this label may wait: a label in a CSV reader's
    /// scratch (a quoted field with doubled quotes) or joined from several
    /// columns lives only while its line is read.
    @inline(__always)
    private func holds(_ label: UnsafeRawBufferPointer?) -> Bool {
        guard let piece = heldPiece else { return false }
        guard let label, let start = label.baseAddress else { return true }
        return start >= piece.baseAddress! && start + label.count <= piece.baseAddress! + piece.count
    }

    private func completeOldest() {
        let e = pending[pendingStart & (Self.pendingSize - 1)]
        pendingStart += 1
        let labelID = e.label.map { labels.intern($0, hash: e.hash) }
        guard sortFailure == nil else { return }
        do {
            try sorter.append(key: e.key, origin: e.origin,
                              value: DirectoryFormat.encodeValue(blocked: e.blocked, label: labelID, allowed: e.allowed))
        } catch {
            sortFailure = error
        }
    }

    private func flushPending() {
        while pendingStart < pendingEnd { completeOldest() }
    }

    /// The one reading of a cleaned number field: the plan of the file (or the
    /// compile's plan), counting the exact numbers the plan holds no range for.
    private func pattern(_ bytes: UnsafeRawBufferPointer) -> Result<NumberPattern, InvalidNumber> {
        // Called on the stored normalizers, not on a copy of one: a copy costs
        // reference counting on every line.
        if !northAmericanFile, let number = homeCanonical?.read(bytes) { return .success(.exact(number)) }
        let (pattern, notInPlan) = northAmericanFile ? Self.northAmerica.patternAndValidity(bytes: bytes)
            : normalizer.patternAndValidity(bytes: bytes)
        if notInPlan { notInPlanCount += 1 }
        return pattern
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
        case block, identify, allow

        init(_ action: CSVRowAction) {
            switch action {
            case .block: self = .block
            case .identify: self = .identify
            case .allow: self = .allow
            }
        }
    }

    /// One bad part of a line, in the operator's words.
    struct CompileProblem: Error {
        var message: String
        init(_ message: String) { self.message = message }
    }

    /// North America's plan, for the FTC's ten-digit numbers.
    private static let northAmerica = NumberNormalizer(plan: try! NumberingPlan(region: "US"))

    private static let actionWords: [(word: [UInt8], action: Action)] =
        ["block", "blocked", "b", "reject", "deny"].map { (Array($0.utf8), Action.block) }
        + ["identify", "identified", "i", "label", "id"].map { (Array($0.utf8), Action.identify) }
        + ["allow", "allowed", "a", "permit", "accept"].map { (Array($0.utf8), Action.allow) }

    private static let packedActionWords: [(word: UInt64, count: Int, action: Action)] = actionWords.compactMap { candidate in
        guard candidate.word.count <= 8 else { return nil }
        var packed: UInt64 = 0
        for (i, b) in candidate.word.enumerated() { packed |= UInt64(b) << UInt64(8 * i) }
        return (packed, candidate.word.count, candidate.action)
    }

    /// nil: not an action word; .some(nil): empty (no action given).
    private func parseAction(_ bytes: UnsafeRawBufferPointer) -> Action?? {
        let text = trimSpaces(bytes)
        if text.isEmpty { return .some(nil) }
        // Compared in place, case-insensitively: this runs once per source line.
        // A word of eight letters or fewer, lowercased into one integer, is
        // compared with each candidate in one step.
        if text.count <= 8 {
            var packed: UInt64 = 0
            for i in 0..<text.count { packed |= UInt64(lowercase(text[i])) << UInt64(8 * i) }
            for candidate in Self.packedActionWords where candidate.word == packed && candidate.count == text.count {
                return .some(candidate.action)
            }
            return nil
        }
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

    private func readCSV(_ bytes: UnsafeRawBufferPointer, _ state: PieceReader, name: String, file: UInt64, more: Bool) throws -> Int {
        if !state.started {
            // No delimiter in the first line: a single-column file (a header
            // `number` and one number per line), or an empty one.
            state.delimiter = CSVDelimiter.detect(in: bytes) ?? .comma
            state.started = true
        }
        let delimiter = state.delimiter
        let mapping = source.columns
        let reader = CSVReader(bytes: bytes, delimiter: delimiter)
        let read = try reader.forEachRecord(firstLine: state.line, more: more) { record in
            if state.plan == nil {
                if state.headerFailed { return }
                state.plan = try csvPlan(record, name: name, file: file, mapping: mapping)
                if state.plan == nil { state.headerFailed = true }
                state.single = state.plan?.single
                state.width = state.plan?.width ?? 0
                state.defaultAction = state.plan?.defaultAction
                // The first line is a header, unless the operator said there is none.
                if !mapping.noHeader || state.plan == nil { return }
            }
            if let s = state.single {
                readSingleRow(record, s, width: state.width, defaultAction: state.defaultAction, delimiter: delimiter, name: name, file: file)
            } else {
                readCSVRow(record, state.plan!, delimiter: delimiter, name: name, file: file)
            }
        }
        state.line = read.nextLine
        return read.consumed
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
                reject(name, record.line, ["unknown action '\(Self.printable(record[a]))' (expected block, identify or allow)"])
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
                reject(name, record.line, ["unknown action '\(Self.printable(record[a]))' (expected block, identify or allow)"])
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
                        problems.append("unknown action '\(Self.printable(text))' (expected block, identify or allow)")
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

    /// What `write(to:)` wrote.
    public struct Written: Sendable {
        public var exactEntries = 0
        public var prefixRules = 0
        /// Entries and rules that block, and that carry a label.
        public var blocking = 0
        /// Entries and rules that allow (the file is then format version 3).
        public var allowing = 0
        public var identified = 0
        public var labels = 0
        /// Sorted runs written to the temporary folder (0: everything fit
        /// in memory), and the temporary bytes at their peak.
        public var runs = 0
        public var temporaryBytes = 0
        /// `LabelRules.backslashWarning` for the labels written, if any holds one.
        public var backslashWarning: String? = nil
    }

    /// Sorts, resolves duplicates and builds the content in memory; fails
    /// with every diagnostic when any source line was bad.
    public func finish() -> Result<DirectoryContent, CompileFailure> {
        var exactKeys: [UInt64] = [], exactValues: [UInt32] = []
        var prefixKeys: [UInt64] = [], prefixValues: [UInt32] = []
        exactKeys.reserveCapacity(sorter.totalRecords)
        exactValues.reserveCapacity(sorter.totalRecords)
        let used: [Bool]
        do {
            used = try resolve { (key, value) throws(DirectoryError) in
                if key >> 63 == 0 {
                    exactKeys.append(key)
                    exactValues.append(value)
                } else {
                    prefixKeys.append(key & ~(1 << 63))
                    prefixValues.append(value)
                }
            }
        } catch {
            return .failure(failure(error))
        }
        if diagnosticCount > 0 {
            return .failure(CompileFailure(diagnostics: diagnostics.sorted(by: Self.ordered), total: diagnosticCount))
        }
        let (table, remap) = labelTable(used)
        var content = DirectoryContent()
        content.directoryVersion = options.directoryVersion
        content.plan = RecordedPlan(options.plan, metadata: NumberingData.installed.fingerprint)
        content.labels = (0..<table.count).map { i in table.withLabel(i) { Array($0) } }
        content.exactKeys = exactKeys
        content.exactValues = exactValues.map { remapped($0, remap) }
        content.prefixKeys = prefixKeys
        content.prefixValues = prefixValues.map { remapped($0, remap) }
        return .success(content)
    }

    /// Sorts, resolves duplicates and writes the directory file at `path`
    /// (atomically), streaming the entries from the sorted runs into it:
    /// memory stays within `options.memoryBudget` whatever the size.
    /// Fails with every diagnostic when any source line was bad; throws
    /// when a file cannot be written.
    public func write(to path: String, progress written: DirectoryWriter.Progress? = nil) throws(DirectoryError) -> Result<Written, CompileFailure> {
        var summary = Written()
        let spool = KeptSpool(folder: sorter.spilled ? options.temporaryFolder : nil)
        defer { spool.remove() }
        let used = try resolve { (key, value) throws(DirectoryError) in try spool.append(key, value) }
        summary.runs = sorter.runsWritten
        if diagnosticCount > 0 {
            return .failure(CompileFailure(diagnostics: diagnostics.sorted(by: Self.ordered), total: diagnosticCount))
        }
        let (table, remap) = labelTable(used)
        var plan = DirectoryPlan(entryCount: spool.exactCount, prefixCount: spool.count - spool.exactCount, labels: table)
        plan.directoryVersion = options.directoryVersion
        plan.recordedPlan = RecordedPlan(options.plan, metadata: NumberingData.installed.fingerprint)
        try DirectoryWriter.write(plan, to: path, progress: written, formatVersion: options.fileFormat) { (sink) throws(DirectoryError) in
            try spool.replay { (key, value) throws(DirectoryError) in
                let v = remapped(value, remap)
                if v & 1 != 0 { summary.blocking += 1 }
                if DirectoryFormat.labelPlusOne(v) != 0 { summary.identified += 1 }
                if DirectoryFormat.allows(v) { summary.allowing += 1 }
                if key >> 63 == 0 { try sink.exact(key, v) } else { try sink.prefix(key & ~(1 << 63), v) }
            }
        }
        // The runs are removed once merged, when the kept entries are all spooled.
        summary.temporaryBytes = sorter.spilledBytes + spool.bytes
        summary.exactEntries = plan.entryCount
        summary.prefixRules = plan.prefixCount
        summary.labels = table.count
        var withBackslash: [[UInt8]] = []
        for i in 0..<table.count {
            table.withLabel(i) { if $0.contains(0x5C) { withBackslash.append(Array($0)) } }
        }
        summary.backslashWarning = LabelRules.backslashWarning(withBackslash)
        return .success(summary)
    }

    /// Everything `write(to:)` does but the writing: the counts, or every
    /// diagnostic (`lookupd update` checks a feed's list with it).
    public func check() throws(DirectoryError) -> Result<Written, CompileFailure> {
        var summary = Written()
        let used = try resolve { (key, value) throws(DirectoryError) in
            if key >> 63 == 0 { summary.exactEntries += 1 } else { summary.prefixRules += 1 }
            if value & 1 != 0 { summary.blocking += 1 }
            if DirectoryFormat.labelPlusOne(value) != 0 { summary.identified += 1 }
            if DirectoryFormat.allows(value) { summary.allowing += 1 }
        }
        summary.runs = sorter.runsWritten
        summary.temporaryBytes = sorter.spilledBytes
        summary.labels = used.filter { $0 }.count
        if diagnosticCount > 0 {
            return .failure(CompileFailure(diagnostics: diagnostics.sorted(by: Self.ordered), total: diagnosticCount))
        }
        return .success(summary)
    }

    private func failure(_ error: DirectoryError) -> CompileFailure {
        CompileFailure(diagnostics: [Diagnostic(file: options.temporaryFolder ?? "sort", line: 0, message: "\(error)")], total: 1)
    }

    /// Reads the entries in (key, reading) order, resolves the lines that
    /// give one number (or rule) more than once, and hands each entry kept
    /// to `keep` (not when there were errors already: nothing will be
    /// written). Returns which labels the kept entries use.
    private func resolve(_ keep: (UInt64, UInt32) throws(DirectoryError) -> Void) throws(DirectoryError) -> [Bool] {
        if let sortFailure { throw sortFailure }
        progress?("sorting", 0)
        var used = [Bool](repeating: false, count: labels.count)
        let keeping = diagnosticCount == 0
        let total = max(1, sorter.totalRecords)
        var seen = 0
        var first = SortedRecord(key: 0, origin: 0, value: 0)
        var chosen = first
        var inGroup = false
        func close() throws(DirectoryError) {
            let labelPlusOne = DirectoryFormat.labelPlusOne(chosen.value)
            if labelPlusOne != 0 { used[Int(labelPlusOne) - 1] = true }
            if keeping { try keep(chosen.key, chosen.value) }
        }
        try sorter.drain { (r) throws(DirectoryError) in
            seen += 1
            if seen & 0xFFFFF == 0 { progress?("sorting", Double(seen) / Double(total)) }
            guard inGroup, r.key == first.key else {
                if inGroup { try close() }
                first = r
                chosen = r
                inGroup = true
                return
            }
            if r.value == first.value {
                summary.duplicatesMerged += 1
            } else {
                switch options.onDuplicate {
                case .error:
                    let a = first, b = r
                    if lenientFiles.contains(UInt64(fileIndex(a.origin))), lenientFiles.contains(UInt64(fileIndex(b.origin))) {
                        // An export lists a number once per complaint (or
                        // contact): the first row decides, as for feeds.
                        summary.conflictsKeptFirst += 1
                        warn(fileName(b.origin), line(b.origin), "\(describeKey(a.key)) again (\(describeValue(b.value))): \(fileName(a.origin)):\(line(a.origin)) kept (\(describeValue(a.value)))")
                    } else {
                        report(fileName(b.origin), line(b.origin),
                               "\(describeKey(a.key)) conflicts with \(fileName(a.origin)):\(line(a.origin)) (\(describeValue(b.value)) here, \(describeValue(a.value)) there); use --on-duplicate first|last to choose")
                    }
                case .first: summary.conflictsKeptFirst += 1
                case .last: summary.conflictsKeptLast += 1
                }
            }
            if options.onDuplicate == .last { chosen = r }
        }
        if inGroup { try close() }
        progress?("sorting", 1)
        return used
    }

    /// Only labels still in use, in byte order, so the same entries always
    /// give the same file (compile -> export -> compile is identical); and
    /// the new number of each interned label.
    private func labelTable(_ used: [Bool]) -> (LabelTable, [UInt32]) {
        let order = labels.sortedIDs((0..<labels.count).filter { used[$0] })
        var remap = [UInt32](repeating: 0, count: labels.count)
        var table = LabelTable()
        for (newID, oldID) in order.enumerated() {
            remap[oldID] = UInt32(newID)
            table.append(labels.bytes(oldID))
        }
        return (table, remap)
    }

    private func remapped(_ value: UInt32, _ remap: [UInt32]) -> UInt32 {
        var v = value & (1 | DirectoryFormat.allowBit)
        let labelPlusOne = DirectoryFormat.labelPlusOne(value)
        if labelPlusOne != 0 { v |= (remap[Int(labelPlusOne) - 1] + 1) << 1 }
        return v
    }

    /// The file an origin was read from, by the bases in `files`.
    private func fileIndex(_ origin: UInt64) -> Int {
        var lo = 0, hi = files.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if files[mid].base <= origin { lo = mid } else { hi = mid - 1 }
        }
        return lo
    }

    private func line(_ origin: UInt64) -> Int { Int(origin - files[fileIndex(origin)].base) }

    private func fileName(_ origin: UInt64) -> String { files[fileIndex(origin)].name }

    private func describeKey(_ key: UInt64) -> String {
        if key >> 63 == 0 { return "+\(key)" }
        let digits = key & ((1 << 56) - 1)
        return "+\(digits)*"
    }

    private func describeValue(_ value: UInt32) -> String {
        var parts: [String] = []
        if value & 1 != 0 { parts.append("block") }
        if DirectoryFormat.allows(value) { parts.append("allow") }
        let labelPlusOne = DirectoryFormat.labelPlusOne(value)
        if labelPlusOne != 0 { parts.append("label '\(String(decoding: labels.bytes(Int(labelPlusOne) - 1), as: UTF8.self))'") }
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

    public static func printable(_ text: String, limit: Int = 60) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(limit) {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        if text.unicodeScalars.count > limit { out += "..." }
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
