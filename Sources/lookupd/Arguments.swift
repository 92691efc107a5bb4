import Configuration
import Glibc
import SystemCalls
import TextFormats

/// A command-line mistake: printed with the subcommand's usage, exit status 2.
struct UsageError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

/// A failure while doing the work: printed as `lookupd: message`, exit status 1.
struct CommandFailure: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

/// Minimal option parsing: `--name value`, `--name=value`, flags, `-o` style
/// short aliases, `--` to end options, and positionals. Each subcommand
/// declares what it takes; anything else is a usage error.
struct Arguments {
    private(set) var positionals: [String] = []
    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []

    /// - Parameters:
    ///   - valued: option names that take a value (without dashes).
    ///   - flags: option names that do not.
    ///   - aliases: short option (`o`) to long name (`output`).
    init(_ args: [String], valued: Set<String>, flags flagNames: Set<String>, aliases: [String: String] = [:]) throws(UsageError) {
        var i = 0
        var onlyPositionals = false
        while i < args.count {
            let arg = args[i]
            i += 1
            if onlyPositionals || arg == "-" || !arg.hasPrefix("-") {
                positionals.append(arg)
                continue
            }
            if arg == "--" { onlyPositionals = true; continue }
            var name: String
            var inline: String? = nil
            if arg.hasPrefix("--") {
                name = String(arg.dropFirst(2))
                if let eq = name.firstIndex(of: "=") {
                    inline = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
            } else {
                let short = String(arg.dropFirst())
                // Every subcommand's usage documents -h.
                if short == "h" { flags.insert("help"); continue }
                guard let long = aliases[short] else {
                    // A negative number or a number starting with '-' is not an option here.
                    throw UsageError("unknown option '\(arg)'")
                }
                name = long
            }
            if name == "help" || name == "h" { flags.insert("help"); continue }
            if valued.contains(name) {
                let value: String
                if let inline { value = inline } else {
                    guard i < args.count else { throw UsageError("option --\(name) needs a value") }
                    value = args[i]
                    i += 1
                }
                values[name, default: []].append(value)
            } else if flagNames.contains(name) {
                guard inline == nil else { throw UsageError("option --\(name) takes no value") }
                flags.insert(name)
            } else {
                throw UsageError("unknown option '--\(name)'")
            }
        }
    }

    func flag(_ name: String) -> Bool { flags.contains(name) }

    func value(_ name: String) throws(UsageError) -> String? {
        guard let all = values[name] else { return nil }
        guard all.count == 1 else { throw UsageError("option --\(name) given more than once") }
        return all[0]
    }

    func all(_ name: String) -> [String] { values[name] ?? [] }
}

/// Buffered writes to a file descriptor: the bulk query path formats
/// hundreds of thousands of lines a second and must not pay a syscall each.
struct OutputBuffer {
    let fd: Int32
    var bytes: [UInt8] = []
    /// Writing to a file (`exitOnError` false): the first write error, after which nothing
    /// more is written; the caller reports it.
    private(set) var failure: Errno?
    private let exitOnError: Bool

    init(fd: Int32, exitOnError: Bool = true) {
        self.fd = fd
        self.exitOnError = exitOnError
        bytes.reserveCapacity(1 << 16)
    }

    mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }
    mutating func append(_ raw: UnsafeRawBufferPointer) { bytes.append(contentsOf: raw) }
    mutating func append(byte: UInt8) { bytes.append(byte) }
    mutating func append(_ more: [UInt8]) { bytes.append(contentsOf: more) }

    mutating func flushIfLarge() { if bytes.count >= 1 << 16 { flush() } }

    mutating func flush() {
        defer { bytes.removeAll(keepingCapacity: true) }
        guard failure == nil else { return }
        do { try FileDescriptor(rawValue: fd).writeAll(bytes) } catch {
            // EPIPE (the reader went away, `lookupd query - | head`): stop quietly.
            if exitOnError { exit(error == Errno(EPIPE) ? 0 : 1) }
            failure = error
        }
    }

    /// Appends `raw` as the contents of a JSON string (without quotes).
    mutating func appendJSONEscaped(_ raw: UnsafeRawBufferPointer) {
        for c in raw {
            switch c {
            case UInt8(ascii: "\""): bytes.append(0x5C); bytes.append(c)
            case UInt8(ascii: "\\"): bytes.append(0x5C); bytes.append(c)
            case 0x0A: bytes.append(0x5C); bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(0x5C); bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(0x5C); bytes.append(UInt8(ascii: "t"))
            case 0..<0x20, 0x7F:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(c >> 4)], hex[Int(c & 15)]])
            default: bytes.append(c)
            }
        }
    }

    mutating func appendJSONString(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { appendJSONEscaped(UnsafeRawBufferPointer($0)) }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends text for a tab-separated line: tabs, newlines and other
    /// control characters become spaces so each answer stays one line.
    mutating func appendField(_ raw: UnsafeRawBufferPointer) {
        for c in raw { bytes.append(c < 0x20 || c == 0x7F ? 0x20 : c) }
    }
}

/// Every message to the operator has one of three prefixes: `lookupd: error:`,
/// `lookupd: warning:` and `lookupd: note:`.
func printError(_ message: String) { printMessage("error", message) }

func printWarning(_ message: String) { printMessage("warning", message) }

func printNote(_ message: String) { printMessage("note", message) }

private func printMessage(_ kind: String, _ message: String) {
    var out = OutputBuffer(fd: 2)
    out.append("lookupd: \(kind): " + message + "\n")
    out.flush()
}

/// A `--json` document on standard output, one line.
func printJSON(_ w: JSONWriter) {
    var out = OutputBuffer(fd: 1)
    out.append(w.line)
    out.flush()
}

/// "1 number", "2 numbers".
func plural(_ n: Int, _ one: String, _ many: String? = nil) -> String {
    "\(n) \(n == 1 ? one : many ?? one + "s")"
}

/// The name among `names` closest to a mistyped one, for "did you mean".
func closest(_ given: String, among names: [String]) -> String? {
    let best = names.map { ($0, ConfigParser.editDistance($0, given)) }.min { $0.1 < $1.1 }
    guard let best, best.1 <= max(2, given.count / 3), best.1 < given.count else { return nil }
    return best.0
}

func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }
