/// An error in operator-supplied text, located by line (and column where the
/// format makes one meaningful).
///
/// `description` is `line N: message` (or `line N, column C: message`), so a
/// caller that prefixes the file name gets `file: line N: message`. Messages
/// are written for operators: they say what is wrong and, where it helps,
/// how to fix it.
public struct TextFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    /// 1-based physical line number.
    public var line: Int
    /// 1-based column counted in Unicode scalars, when known.
    public var column: Int?
    /// What is wrong, without the location.
    public var message: String

    public init(line: Int, column: Int? = nil, message: String) {
        self.line = line
        self.column = column
        self.message = message
    }

    public var description: String {
        if let column {
            return "line \(line), column \(column): \(message)"
        }
        return "line \(line): \(message)"
    }
}
