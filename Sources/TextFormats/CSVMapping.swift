/// Which columns of a CSV source hold what: named by the operator
/// (`--number-column` and friends, `number-column=` on a `feed =` line),
/// found in lookupd's own header words, or recognised from the header of a
/// well-known export (`CSVExportShape`).

/// A column, by its header name (compared without case and surrounding
/// spaces) or by its position (1 is the first).
public enum CSVColumn: Equatable, Sendable, CustomStringConvertible {
    case name(String)
    case index(Int)

    /// `3` is the third column; anything else is a header name.
    public init?(_ text: String) {
        let trimmed = text.trimmingSpacesAndBOM()
        guard !trimmed.isEmpty else { return nil }
        if trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            guard let n = Int(trimmed), n >= 1, n <= 10_000 else { return nil }
            self = .index(n)
        } else {
            self = .name(trimmed)
        }
    }

    public var description: String {
        switch self {
        case .name(let name): return "'\(name)'"
        case .index(let i): return "column \(i)"
        }
    }

    /// The 0-based position in `header` (nil for an index: it needs no header).
    func position(in header: [String]) -> Int? {
        switch self {
        case .index(let i): return i - 1
        case .name(let name):
            let wanted = name.lowercased()
            return header.firstIndex { $0.trimmingSpacesAndBOM().lowercased() == wanted }
        }
    }
}

/// What a row means when the file does not say: the action for rows with
/// no action column (or an empty one).
public enum CSVRowAction: String, CaseIterable, Sendable {
    case block
    case identify
    /// Lower-priority directories do not block the number (docs/POLICIES.md).
    case allow
}

/// The columns the operator named. Empty: lookupd's own header (or a
/// recognised export) decides.
public struct CSVColumnMapping: Equatable, Sendable {
    public var number: CSVColumn?
    /// The label (a directory) or the contact's name (contacts).
    public var label: CSVColumn?
    public var action: CSVColumn?
    /// The first line is data, not a header.
    public var noHeader = false

    public init(number: CSVColumn? = nil, label: CSVColumn? = nil, action: CSVColumn? = nil, noHeader: Bool = false) {
        self.number = number
        self.label = label
        self.action = action
        self.noHeader = noHeader
    }

    /// Some column is named: the columns not named are ignored.
    public var namesColumns: Bool { number != nil || label != nil || action != nil }
}

/// Exports lookupd recognises by their header, so that an operator can
/// compile (or load as contacts) the file a tool gave them as it is.
/// docs/FORMATS.md shows a sample of each.
public enum CSVExportShape: String, CaseIterable, Sendable {
    /// FreePBX Blacklist module, Import/Export → Export: `number,description`.
    case freePBXBlacklist
    /// The FTC's Do Not Call complaint data (`Company_Phone_Number, ..., Subject, ...`).
    case ftcComplaints
    /// Google Contacts "Google CSV", the current one (`First Name, ..., Phone 1 - Value`)
    /// and the older one (`Name, Given Name, ..., Phone 1 - Value`).
    case googleContacts
    /// Outlook's "Comma Separated Values" export (and Google's "Outlook CSV").
    case outlookContacts

    /// "a FreePBX Blacklist export", for the summary line.
    public var name: String {
        switch self {
        case .freePBXBlacklist: return "a FreePBX Blacklist export"
        case .ftcComplaints: return "an FTC Do Not Call complaints file"
        case .googleContacts: return "a Google Contacts export"
        case .outlookContacts: return "an Outlook contacts export"
        }
    }

    /// What the shape means for a directory, for the summary line.
    public var meaning: String {
        switch self {
        case .freePBXBlacklist: return "every row blocks, the description is the label"
        case .ftcComplaints: return "every row blocks, the subject is the label, numbers are North American (+1)"
        case .googleContacts, .outlookContacts: return "every phone number is identified with the contact's name"
        }
    }

    /// The action of every row.
    public var action: CSVRowAction {
        switch self {
        case .freePBXBlacklist, .ftcComplaints: return .block
        case .googleContacts, .outlookContacts: return .identify
        }
    }

    /// The FTC publishes complaints about North American numbers only, as
    /// ten digits: they must be read with country code 1 whatever the
    /// configured home country is.
    public var isNorthAmerican: Bool { self == .ftcComplaints }

    /// Exports list every contact, with or without a phone; every FTC
    /// complaint, with or without the caller's number. Such rows are
    /// skipped (and counted), not errors.
    public var allowsEmptyNumbers: Bool { self != .freePBXBlacklist }

    /// The shape `header` is, with the columns it uses.
    public static func recognize(_ header: [String]) -> CSVLayout? {
        let names = header.map { $0.trimmingSpacesAndBOM() }
        let lower = names.map { $0.lowercased() }
        func column(_ name: String) -> Int? { lower.firstIndex(of: name.lowercased()) }

        // FreePBX writes exactly this header (fputcsv of number, description).
        if lower.count == 2, lower[0] == "number", lower[1] == "description" {
            return CSVLayout(shape: .freePBXBlacklist, numberColumns: [0], labelGroups: [[1]], fixedAction: .block)
        }
        if let number = column("Company_Phone_Number"), let subject = column("Subject"),
           column("Recorded_Message_Or_Robocall") != nil || column("Created_Date") != nil {
            return CSVLayout(shape: .ftcComplaints, numberColumns: [number], labelGroups: [[subject]], fixedAction: .block)
        }
        let phoneValues = lower.indices.filter { isGooglePhoneValue(lower[$0]) }
        if !phoneValues.isEmpty {
            // Current export: First/Middle/Last Name; older: Name (then
            // Given/Family Name). Then the organization, for a company card.
            let full = ["name"].compactMap(column)
            let parts = ["first name", "middle name", "last name"].compactMap(column)
            let given = ["given name", "additional name", "family name"].compactMap(column)
            let organization = ["organization name", "organization 1 - name"].compactMap(column)
            let label = [full, parts, given, organization].filter { !$0.isEmpty }
            guard !label.isEmpty else { return nil }
            return CSVLayout(shape: .googleContacts, numberColumns: phoneValues, labelGroups: label, fixedAction: .identify,
                             splitsValues: true)
        }
        let outlookPhones = lower.indices.filter { outlookPhoneColumns.contains(lower[$0]) }
        if !outlookPhones.isEmpty, let first = column("First Name"), let last = column("Last Name") {
            var label = [[first] + ["middle name"].compactMap(column) + [last]]
            if let company = column("Company") { label.append([company]) }
            return CSVLayout(shape: .outlookContacts, numberColumns: outlookPhones, labelGroups: label, fixedAction: .identify)
        }
        return nil
    }

    /// "phone 1 - value", "phone 12 - value".
    static func isGooglePhoneValue(_ name: String) -> Bool {
        guard name.hasPrefix("phone "), name.hasSuffix(" - value") else { return false }
        let middle = name.dropFirst(6).dropLast(8)
        return !middle.isEmpty && middle.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    /// Outlook's telephone columns. Fax machines call too; pagers and
    /// telex do not.
    static let outlookPhoneColumns: Set<String> = [
        "assistant's phone", "business fax", "business phone", "business phone 2", "callback", "car phone",
        "company main phone", "home fax", "home phone", "home phone 2", "isdn", "mobile phone", "other fax",
        "other phone", "primary phone", "radio phone", "tty/tdd phone",
    ]
}

/// Where a row's fields are, once the header (or the mapping) is known.
public struct CSVLayout: Equatable, Sendable {
    /// The export recognised, nil for lookupd's own shape or named columns.
    public var shape: CSVExportShape?
    /// Columns holding numbers (0-based): one, except in contact exports.
    public var numberColumns: [Int]
    /// The label, as the first of these groups that is not empty, each
    /// group's non-empty fields joined with a space (a contact's first,
    /// middle and last name; else its company).
    public var labelGroups: [[Int]]
    public var actionColumn: Int?
    /// The action of every row (a recognised export), overriding any default.
    public var fixedAction: CSVRowAction?
    /// A field may hold several numbers separated by ":::" (Google).
    public var splitsValues = false
    /// Fields past the ones used are ignored (named columns, exports);
    /// otherwise a row with more non-empty fields than the header is an error.
    public var ignoresExtraColumns = true
    /// A row with an empty number field is a row without a number, counted
    /// in the summary, not an error: an export (recognised, or a file with
    /// a header whose columns are named) has rows for contacts without a
    /// phone and complaints without a caller. lookupd's own lists are strict.
    public var skipsEmptyNumbers: Bool

    public init(shape: CSVExportShape? = nil, numberColumns: [Int], labelGroups: [[Int]] = [], actionColumn: Int? = nil,
                fixedAction: CSVRowAction? = nil, splitsValues: Bool = false, ignoresExtraColumns: Bool = true) {
        self.shape = shape
        self.numberColumns = numberColumns
        self.labelGroups = labelGroups
        self.actionColumn = actionColumn
        self.fixedAction = fixedAction
        self.splitsValues = splitsValues
        self.ignoresExtraColumns = ignoresExtraColumns
        self.skipsEmptyNumbers = shape?.allowsEmptyNumbers ?? false
    }

    /// The columns the operator named, resolved against `header` (nil:
    /// the file has none). Throws when a name is not in the header.
    public static func named(_ mapping: CSVColumnMapping, header: [String]?, line: Int) throws -> CSVLayout {
        func resolve(_ column: CSVColumn?, _ what: String) throws -> Int? {
            guard let column else { return nil }
            if case .name(let name) = column {
                guard let header else {
                    throw TextFormatError(line: line, message: "\(what) column '\(name)' is named, but the file has no header line (name it by number: 1 is the first column)")
                }
                guard let position = column.position(in: header) else {
                    let known = header.map { $0.trimmingSpacesAndBOM() }.filter { !$0.isEmpty }.prefix(12).map { "'\($0)'" }
                    throw TextFormatError(line: line, message: "no column named '\(name)' in the header (it has \(known.joined(separator: ", "))\(header.count > 12 ? ", ..." : ""))")
                }
                return position
            }
            return column.position(in: [])
        }
        guard let number = try resolve(mapping.number, "the number") else {
            throw TextFormatError(line: line, message: "name the number column too (--number-column NAME or NUMBER)")
        }
        var layout = CSVLayout(numberColumns: [number])
        if let label = try resolve(mapping.label, "the label") { layout.labelGroups = [[label]] }
        layout.actionColumn = try resolve(mapping.action, "the action")
        layout.skipsEmptyNumbers = header != nil
        return layout
    }

    /// The highest column a row needs, 0-based.
    var lastColumn: Int {
        max(numberColumns.max() ?? 0, labelGroups.flatMap { $0 }.max() ?? 0, actionColumn ?? 0)
    }

    /// The numbers of `record`: each number column's field, split at
    /// ":::" where the export does that, without the empty ones.
    public func numbers(_ record: CSVRecord) -> [UnsafeRawBufferPointer] {
        var out: [UnsafeRawBufferPointer] = []
        for column in numberColumns where column < record.count {
            let field = record[column]
            guard splitsValues else {
                if !CSVLayout.isBlank(field) { out.append(field) }
                continue
            }
            var start = 0
            var i = 0
            let n = field.count
            while i + 3 <= n {
                if field[i] == 0x3A, field[i + 1] == 0x3A, field[i + 2] == 0x3A {
                    let part = UnsafeRawBufferPointer(rebasing: field[start..<i])
                    if !CSVLayout.isBlank(part) { out.append(part) }
                    i += 3
                    start = i
                } else {
                    i += 1
                }
            }
            let part = UnsafeRawBufferPointer(rebasing: field[start..<n])
            if !CSVLayout.isBlank(part) { out.append(part) }
        }
        return out
    }

    /// The label of `record`, nil when every label column is empty. A
    /// single column is handed back in place (no copy).
    public func withLabel<R>(_ record: CSVRecord, _ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
        for group in labelGroups {
            if group.count == 1 {
                let c = group[0]
                if c < record.count, !CSVLayout.isBlank(record[c]) { return try body(record[c]) }
                continue
            }
            let parts = group.filter { $0 < record.count && !CSVLayout.isBlank(record[$0]) }.map { record.string($0).trimmingSpacesAndBOM() }
            if !parts.isEmpty {
                // Groups are given name first, family name last; Chinese,
                // Japanese and Korean names are written family name first,
                // without spaces (as VCardName does).
                var joined = parts.allSatisfy(VCardName.isCJK) ? parts.reversed().joined() : parts.joined(separator: " ")
                return try joined.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
            }
        }
        return try body(nil)
    }

    public static func isBlank(_ bytes: UnsafeRawBufferPointer) -> Bool {
        for b in bytes where b != 0x20 && b != 0x09 { return false }
        return true
    }

    /// Whether `record` has non-empty fields past the columns of the header
    /// (`width` fields): empty trailing fields (a trailing delimiter) never count.
    public static func hasExtraFields(_ record: CSVRecord, width: Int) -> Bool {
        guard record.count > width else { return false }
        for i in width..<record.count where !isBlank(record[i]) { return true }
        return false
    }
}

extension String {
    /// Without spaces and tabs around it, nor a BOM a spreadsheet left on
    /// the first header name.
    func trimmingSpacesAndBOM() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" || f == "\u{FEFF}" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
