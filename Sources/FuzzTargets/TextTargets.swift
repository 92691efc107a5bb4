import Configuration
import Directory
import Screening
import TextFormats

/// config, csv, json, vcard: the whole input is one file. Each runs the
/// low-level reader and then what lookupd builds from it (a configuration,
/// the directory compiler's content, a contacts list), and checks that
/// whatever the compiler accepts is content the writer would accept too.
enum TextTargets {
    static let normalizer = NumberNormalizer(plan: .china)

    static func config(_ bytes: UnsafeRawBufferPointer) {
        // Relative paths resolve against this (never opened) folder.
        guard let config = try? ConfigParser.parse(bytes: bytes, path: "/fuzz/etc/lookupd.conf") else { return }
        for d in config.directories where d.path.isEmpty || d.name.isEmpty {
            FuzzCheck.fail("a directory with an empty path or name: \(d)", bytes)
        }
        if config.maxMessageSize <= 0 || config.tcpMaxConnections <= 0 { FuzzCheck.fail("non-positive limit", bytes) }
        if !isToken(config.labelHeader) { FuzzCheck.fail("label-header '\(config.labelHeader)' is not a token", bytes) }
    }

    static func csv(_ bytes: UnsafeRawBufferPointer) {
        if let delimiter = CSVDelimiter.detect(in: bytes) {
            var fields = 0
            try? CSVReader(bytes: bytes, delimiter: delimiter).forEachRecord { record in
                for i in 0..<record.count { fields &+= record[i].count }
                _ = record.strings
            }
        }
        compile(bytes, .csv)
        contacts(bytes, .csv)
    }

    static func json(_ bytes: UnsafeRawBufferPointer) {
        _ = try? JSONValue.parse(bytes)
        var count = 0
        try? JSONValue.forEachRecord(in: bytes) { _, value in
            count += 1
            _ = value.description
        }
        compile(bytes, .json)
    }

    static func vcard(_ bytes: UnsafeRawBufferPointer) {
        if let cards = try? VCard.parse(bytes) {
            for card in cards {
                _ = card.displayName
                for tel in card.telephones { _ = tel.number }
            }
        }
        compile(bytes, .vcard)
        contacts(bytes, .vcard)
    }

    /// The compiler either reports diagnostics or yields content the
    /// writer's invariants accept.
    static func compile(_ bytes: UnsafeRawBufferPointer, _ format: SourceFormat) {
        let compiler = DirectoryCompiler()
        compiler.add(bytes: bytes, name: "fuzz." + format.rawValue, format: format)
        if case .success(let content) = compiler.finish(), let violation = content.invariantViolation() {
            FuzzCheck.fail("the compiler accepted content the writer refuses: \(violation)", bytes)
        }
    }

    /// Contacts lists are read by the daemon on every reload.
    static func contacts(_ bytes: UnsafeRawBufferPointer, _ format: ContactsFormat) {
        _ = try? ContactList.parse(bytes: bytes, name: "fuzz", format: format, normalizer: normalizer)
    }

    static func isToken(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || Array("-.!%*_+`'~".utf8).contains(c)
        }
    }
}
