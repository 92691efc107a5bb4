import Glibc

/// A failed system call, named for the operator.
///
/// Threading: a plain value.
public struct SystemError: Error, CustomStringConvertible {
    public var operation: String
    public var code: Int32

    init(_ operation: String, _ code: Int32 = errno) {
        self.operation = operation
        self.code = code
    }

    public var description: String { "\(operation): \(String(cString: strerror(code)))" }
}
