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

    public func run(_ bytes: UnsafeRawBufferPointer) {
        switch self {
        case .requestPath: RequestPathTarget.shared.run(bytes)
        case .directory: DirectoryTarget.run(bytes)
        case .config: TextTargets.config(bytes)
        case .csv: TextTargets.csv(bytes)
        case .json: TextTargets.json(bytes)
        case .vcard: TextTargets.vcard(bytes)
        case .journal: JournalTarget.run(bytes)
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
