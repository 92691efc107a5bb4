import Foundation
import Glibc

/// A fresh folder under $TMPDIR (when its path is short) or /tmp, with a
/// short path: a control socket's path inside must fit in sun_path.
public func makeTemporaryFolder(_ prefix: String) throws -> String {
    let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.count < 40 ? $0 : nil } ?? "/tmp"
    var template = Array("\(base.hasSuffix("/") ? String(base.dropLast()) : base)/\(prefix)-XXXXXX".utf8CString)
    guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
        throw TestSupportError.failed("mkdtemp: \(String(cString: strerror(errno)))")
    }
    return String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
}

/// A fresh temporary folder (see `makeTemporaryFolder`), removed by `cleanup()`.
public final class TemporaryFolder {
    public let path: String
    public var url: URL { URL(fileURLWithPath: path, isDirectory: true) }

    public init(_ label: String = "lookupd-tests") {
        do { path = try makeTemporaryFolder(label) } catch { fatalError("\(error)") }
    }

    public func file(_ name: String) -> String { path + "/" + name }

    @discardableResult
    public func write(_ name: String, _ text: String) -> String { write(name, Array(text.utf8)) }

    @discardableResult
    public func write(_ name: String, _ data: Data) -> String { write(name, [UInt8](data)) }

    @discardableResult
    public func write(_ name: String, _ bytes: [UInt8]) -> String {
        let target = file(name)
        precondition(FileManager.default.createFile(atPath: target, contents: Data(bytes)), "cannot write \(target)")
        return target
    }

    public func read(_ name: String) -> [UInt8] { Array(FileManager.default.contents(atPath: file(name)) ?? Data()) }

    public func cleanup() { try? FileManager.default.removeItem(atPath: path) }
}
