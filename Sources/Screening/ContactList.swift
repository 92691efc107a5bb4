import Directory
import TextFormats
import TextRules

/// The formats a contacts list can be written in.
public enum ContactsFormat: String, Sendable, CaseIterable {
    /// `name,number` with a header line; one line per number.
    case csv
    /// vCard 2.1/3.0/4.0: the card's FN and every TEL.
    case vcard

    public static func guess(path: String) -> ContactsFormat? {
        guard let dot = path.lastIndex(of: "."), !path[dot...].contains("/") else { return nil }
        switch path[path.index(after: dot)...].lowercased() {
        case "csv", "tsv": return .csv
        case "vcf", "vcard": return .vcard
        default: return nil
        }
    }
}

/// A contacts (override) list: numbers that are never blocked and are shown
/// with the contact's name.
///
/// Address-book exports are messy (the same number on two cards, `*86`
/// voicemail entries, internal extensions), so numbers that are not
/// telephone numbers and repeated numbers are skipped with a warning rather
/// than refusing the whole list; syntax errors in the file are errors.
/// Threading: immutable value, safe to share.
public struct ContactList: Sendable {
    /// The list's name in decisions and logs (normally its path).
    public let name: String
    private let index: [UInt64: Int32]
    private let nameArena: [UInt8]
    private let nameOffsets: [UInt32]

    public var count: Int { index.count }

    /// Builds a list from (name, number) pairs already normalized.
    public init(name: String, entries: [(name: String, number: PhoneNumber)]) {
        var arena = [UInt8]()
        var offsets: [UInt32] = [0]
        var names: [String: Int32] = [:]
        var index: [UInt64: Int32] = [:]
        for entry in entries where index[entry.number.value] == nil {
            let id: Int32
            if let known = names[entry.name] {
                id = known
            } else {
                id = Int32(offsets.count - 1)
                arena.append(contentsOf: entry.name.utf8)
                offsets.append(UInt32(arena.count))
                names[entry.name] = id
            }
            index[entry.number.value] = id
        }
        self.name = name
        self.index = index
        self.nameArena = arena
        self.nameOffsets = offsets
    }

    /// The contact name id for `number`, if it is a contact.
    public func lookup(_ number: PhoneNumber) -> Int32? { index[number.value] }

    public func withName<R>(_ id: Int32, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let start = Int(nameOffsets[Int(id)]), end = Int(nameOffsets[Int(id) + 1])
        return try nameArena.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
    }

    public func name(_ id: Int32) -> String {
        withName(id) { String(decoding: $0, as: UTF8.self) }
    }

    /// Parses a contacts file's bytes. Throws a `Diagnostic` for a syntax
    /// error; returns the list with warnings for skipped entries.
    /// - Parameter columns: the CSV columns the operator named (`name-column=`
    ///   and `number-column=` on the `contacts =` line); by default the
    ///   header says, or an export lookupd recognises (Google, Outlook).
    public static func parse(bytes: UnsafeRawBufferPointer, name: String, format: ContactsFormat,
                             normalizer: NumberNormalizer, columns: CSVColumnMapping = CSVColumnMapping())
                             throws(Diagnostic) -> (list: ContactList, warnings: [Diagnostic]) {
        if let converted = TextInput.utf8FromUTF16(bytes) {
            let result = converted.withUnsafeBytes { raw in
                Result { () throws(Diagnostic) in try parseUTF8(bytes: raw, name: name, format: format, normalizer: normalizer, columns: columns) }
            }
            return try result.get()
        }
        return try parseUTF8(bytes: bytes, name: name, format: format, normalizer: normalizer, columns: columns)
    }

    private static func parseUTF8(bytes: UnsafeRawBufferPointer, name: String, format: ContactsFormat,
                                  normalizer: NumberNormalizer, columns: CSVColumnMapping)
                                  throws(Diagnostic) -> (list: ContactList, warnings: [Diagnostic]) {
        var entries: [(name: String, number: PhoneNumber)] = []
        var firstLine: [UInt64: (line: Int, name: String)] = [:]
        var warnings: [Diagnostic] = []

        func add(contact: String, numberText: String, line: Int) {
            let contact = contact.trimmingCharacters()
            if let problem = LabelRules.problem(contact) {
                warnings.append(Diagnostic(file: name, line: line, message: "contact skipped: name: \(problem)"))
                return
            }
            guard let text = cleaned(numberText, contact: contact, line: line) else { return }
            switch normalizer.normalize(text) {
            case .number(let number), .notInPlan(let number, _):
                if let earlier = firstLine[number.value] {
                    if earlier.name != contact {
                        warnings.append(Diagnostic(file: name, line: line,
                            message: "\(number) is already listed for '\(earlier.name)' on line \(earlier.line); keeping that one"))
                    }
                    return
                }
                firstLine[number.value] = (line, contact)
                entries.append((contact, number))
            case .anonymous:
                warnings.append(Diagnostic(file: name, line: line, message: "'\(numberText)' skipped: not a number"))
            case .invalid(let reason):
                warnings.append(Diagnostic(file: name, line: line, message: "'\(numberText)' skipped: \(reason)"))
            }
        }

        /// The number a phone field is called from: an extension dropped
        /// (with a note), a vanity number refused with its digits as a hint.
        func cleaned(_ text: String, contact: String, line: Int) -> String? {
            var utf8 = text
            return utf8.withUTF8 { raw -> String? in
                let field = UnsafeRawBufferPointer(raw)
                if PhoneText.isBareExtension(field) {
                    warnings.append(Diagnostic(file: name, line: line, message: "'\(text)' skipped: an extension without its number"))
                    return nil
                }
                let split = PhoneText.splitExtension(field)
                let main = String(decoding: split.number, as: UTF8.self)
                if let ext = split.extensionDigits {
                    warnings.append(Diagnostic(file: name, line: line,
                        message: "'\(text)': extension \(String(decoding: ext, as: UTF8.self)) dropped; calls from \(contact) come from the main number \(main)"))
                }
                if PhoneText.isVanity(split.number) {
                    let digits = String(decoding: PhoneText.vanityDigits(split.number), as: UTF8.self)
                    warnings.append(Diagnostic(file: name, line: line,
                        message: "'\(main)' skipped: letters (a vanity number? write it in digits: \(digits))"))
                    return nil
                }
                return main
            }
        }

        do {
            let input = TextInput.strippingBOM(bytes)
            switch format {
            case .csv:
                guard let delimiter = CSVDelimiter.detect(in: input) else {
                    if input.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) {
                        warnings.append(Diagnostic(file: name, line: 0, message: "empty contacts list"))
                        break
                    }
                    throw Diagnostic(file: name, line: 1, message: "missing header line (expected: name,number)")
                }
                var layout: CSVLayout? = nil
                try CSVReader(bytes: input, delimiter: delimiter).forEachRecord { record in
                    if layout == nil {
                        layout = try contactLayout(record, columns: columns, name: name)
                        if !columns.noHeader { return }
                    }
                    let l = layout!
                    let numbers = l.numbers(record)
                    guard !numbers.isEmpty else {
                        // An export lists contacts without a phone too.
                        if l.shape == nil {
                            warnings.append(Diagnostic(file: name, line: record.line, message: "contact skipped: expected a name and a number"))
                        }
                        return
                    }
                    // No name at all: add() says so ("name: empty label").
                    let contact = l.withLabel(record) { $0.map { String(decoding: $0, as: UTF8.self) } } ?? ""
                    for number in numbers {
                        add(contact: contact, numberText: String(decoding: number, as: UTF8.self), line: record.line)
                    }
                }
            case .vcard:
                for card in try VCard.parse(input) {
                    guard let display = card.displayName, !display.isEmpty else {
                        if !card.telephones.isEmpty {
                            warnings.append(Diagnostic(file: name, line: card.line, message: "card without a name skipped"))
                        }
                        continue
                    }
                    for tel in card.telephones {
                        add(contact: display, numberText: tel.number, line: tel.line)
                    }
                }
            }
        } catch let diagnostic as Diagnostic {
            throw diagnostic
        } catch let error as TextFormatError {
            throw Diagnostic(file: name, line: error.line, message: error.message)
        } catch {
            throw Diagnostic(file: name, line: 0, message: "\(error)")
        }
        return (ContactList(name: name, entries: entries), warnings)
    }

    /// Where the names and numbers are: the columns named, a recognised
    /// contacts export, or the header's name and number columns.
    private static func contactLayout(_ first: CSVRecord, columns: CSVColumnMapping, name: String) throws -> CSVLayout {
        let header = columns.noHeader ? nil : first.strings
        if columns.namesColumns {
            do {
                var layout = try CSVLayout.named(columns, header: header, line: first.line)
                if layout.labelGroups.isEmpty {
                    throw Diagnostic(file: name, line: first.line, message: "name the column of the contacts' names too (name-column=)")
                }
                layout.actionColumn = nil
                return layout
            } catch let error as TextFormatError {
                throw Diagnostic(file: name, line: error.line, message: error.message)
            }
        }
        guard let header else { return CSVLayout(numberColumns: [1], labelGroups: [[0]]) }
        if let recognised = CSVExportShape.recognize(header), recognised.fixedAction == .identify {
            return recognised
        }
        var nameColumn: Int? = nil, numberColumn: Int? = nil
        for i in header.indices {
            switch header[i].trimmingCharacters().lowercased() {
            case "name", "contact", "fn", "display name", "displayname": nameColumn = i
            case "number", "phone", "tel", "telephone", "phone number": numberColumn = i
            default: break
            }
        }
        guard let n = nameColumn, let t = numberColumn else {
            throw Diagnostic(file: name, line: first.line,
                             message: "the header must name a 'name' and a 'number' column (or name them: name-column=, number-column=)")
        }
        return CSVLayout(numberColumns: [t], labelGroups: [[n]])
    }
}

extension String {
    func trimmingCharacters() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}
