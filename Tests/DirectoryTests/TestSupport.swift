@_exported import TestSupport
import Foundation
import XCTest
@testable import Directory

/// One in-memory source for the compiler.
struct Source {
    var name: String
    var format: SourceFormat
    var bytes: [UInt8]

    init(_ name: String, _ format: SourceFormat, _ text: String) {
        self.name = name
        self.format = format
        self.bytes = Array(text.utf8)
    }

    init(_ name: String, _ format: SourceFormat, bytes: [UInt8]) {
        self.name = name
        self.format = format
        self.bytes = bytes
    }
}

func compile(_ sources: [Source], options: DirectoryCompiler.Options = .init()) -> Result<DirectoryContent, CompileFailure> {
    let compiler = DirectoryCompiler(options: options)
    for source in sources { compiler.add(bytes: source.bytes, name: source.name, format: source.format) }
    return compiler.finish()
}

/// The diagnostics of a compilation that must fail (empty, with a test failure, if it succeeded).
func diagnostics(_ sources: [Source], options: DirectoryCompiler.Options = .init(),
                 file: StaticString = #filePath, line: UInt = #line) -> [String] {
    switch compile(sources, options: options) {
    case .success:
        XCTFail("compilation succeeded but was expected to fail", file: file, line: line)
        return []
    case .failure(let failure):
        XCTAssertEqual(failure.total, failure.diagnostics.count, "all diagnostics kept", file: file, line: line)
        return failure.diagnostics.map(\.description)
    }
}

/// The content of a compilation that must succeed.
func content(_ sources: [Source], options: DirectoryCompiler.Options = .init(),
             file: StaticString = #filePath, line: UInt = #line) throws -> DirectoryContent {
    switch compile(sources, options: options) {
    case .success(let content): return content
    case .failure(let failure):
        XCTFail("compilation failed: \(failure.diagnostics.map(\.description))", file: file, line: line)
        throw TestError(failure.diagnostics.map(\.description).joined(separator: "\n"))
    }
}

struct TestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Writes `content` to `name` in `folder` and opens it.
func writeAndOpen(_ content: DirectoryContent, in folder: TemporaryFolder, name: String = "test.lkd",
                  formatVersion: UInt32 = DirectoryFormat.version) throws -> DirectoryFile {
    let path = folder.file(name)
    try DirectoryWriter.write(content, to: path, formatVersion: formatVersion)
    return try DirectoryFile(path: path)
}

/// Opening `path` must fail; returns the error.
func openError(_ path: String, file: StaticString = #filePath, line: UInt = #line) -> DirectoryError? {
    do {
        _ = try DirectoryFile(path: path)
        XCTFail("opening \(path) succeeded but was expected to fail", file: file, line: line)
        return nil
    } catch {
        return error
    }
}

/// Opening succeeds but `verify()` must fail; returns the error.
func verifyError(_ path: String, file: StaticString = #filePath, line: UInt = #line) -> DirectoryError? {
    let directory: DirectoryFile
    do { directory = try DirectoryFile(path: path) } catch {
        XCTFail("opening \(path) failed: \(error)", file: file, line: line)
        return nil
    }
    do {
        try directory.verify()
        XCTFail("verify() of \(path) succeeded but was expected to fail", file: file, line: line)
        return nil
    } catch {
        return error
    }
}

/// Everything a directory file holds, as comparable values.
struct FlatEntry: Equatable, CustomStringConvertible {
    var match: NumberPattern
    var blocked: Bool
    var label: String?
    var description: String { "\(match) \(blocked ? "block" : "identify") \(label ?? "-")" }
}

func entries(of directory: DirectoryFile) -> [FlatEntry] {
    var out: [FlatEntry] = []
    try! directory.forEachEntry { entry in
        out.append(FlatEntry(match: entry.match, blocked: entry.blocked, label: entry.label.map { directory.label($0) }))
    }
    return out
}

func number(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> PhoneNumber {
    guard text.hasPrefix("+"), let value = UInt64(text.dropFirst()), let number = PhoneNumber(value: value) else {
        XCTFail("bad test number \(text)", file: file, line: line)
        return PhoneNumber(value: 1)!
    }
    return number
}

func prefix(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> NumberPrefix {
    let digits = text.dropFirst().dropLast()
    guard text.hasPrefix("+"), text.hasSuffix("*"), let value = UInt64(digits),
          let prefix = NumberPrefix(digits: value, length: digits.count) else {
        XCTFail("bad test prefix \(text)", file: file, line: line)
        return NumberPrefix(digits: 1, length: 1)!
    }
    return prefix
}

func readBytes(_ path: String) -> [UInt8] {
    Array(FileManager.default.contents(atPath: path) ?? Data())
}
