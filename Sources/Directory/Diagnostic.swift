import TextFormats

/// A problem in a source file, located for the operator: `file:line: message`.
public struct Diagnostic: Error, Equatable, Sendable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var message: String

    public init(file: String, line: Int, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    public var description: String { line > 0 ? "\(file):\(line): \(message)" : "\(file): \(message)" }
}

/// Diagnostics as an array of {"file", "line", "message"} (line 0: the whole file), the
/// shape every `--json` uses for them.
public func diagnosticsJSON<S: Sequence>(_ w: inout JSONWriter, _ diagnostics: S) where S.Element == Diagnostic {
    w.beginArray()
    for d in diagnostics {
        w.beginObject()
        w.field("file", d.file)
        w.field("line", d.line)
        w.field("message", d.message)
        w.endObject()
    }
    w.endArray()
}
