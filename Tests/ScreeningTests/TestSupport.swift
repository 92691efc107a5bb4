@_exported import TestSupport
import Configuration
import Foundation
import Loading
import XCTest
@testable import Directory
@testable import Screening

/// A number or prefix rule, written any way `lookupd add` reads it.
func pattern(_ text: String) -> NumberPattern {
    guard case .success(let p) = NumberNormalizer().pattern(text) else { fatalError(text) }
    return p
}

/// The set over the directory at `path` with its journal, as `lookupd query` loads it.
func loadDirectory(_ path: String, name: String = "main") throws -> ScreeningSet {
    var config = LookupdConfig()
    config.directories = [DirectoryConfig(path: path, name: name)]
    return try ScreeningLoader.load(config, verify: true).set
}

struct TestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Compiles a CSV directory source into `name` in `folder` and opens it.
@discardableResult
func compileDirectory(_ csv: String, named name: String, in folder: TemporaryFolder,
                      plan: NumberingPlan = .china) throws -> DirectoryFile {
    var options = DirectoryCompiler.Options()
    options.plan = plan
    let compiler = DirectoryCompiler(options: options)
    compiler.add(bytes: Array(csv.utf8), name: name + ".csv", format: .csv)
    switch compiler.finish() {
    case .failure(let failure):
        throw TestError(failure.diagnostics.map(\.description).joined(separator: "\n"))
    case .success(let content):
        let path = folder.file(name)
        try DirectoryWriter.write(content, to: path)
        return try DirectoryFile(path: path)
    }
}

func parseContacts(_ text: String, name: String = "contacts", format: ContactsFormat,
                   normalizer: NumberNormalizer = NumberNormalizer()) throws -> (list: ContactList, warnings: [Diagnostic]) {
    let bytes = Array(text.utf8)
    let result = bytes.withUnsafeBytes { raw in
        Result { () throws(Diagnostic) in try ContactList.parse(bytes: raw, name: name, format: format, normalizer: normalizer) }
    }
    return try result.get()
}

func number(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> PhoneNumber {
    guard case .number(let n) = NumberNormalizer().normalize(text) else {
        XCTFail("bad test number \(text)", file: file, line: line)
        return PhoneNumber(value: 1)!
    }
    return n
}

/// The folder holding the repository's sample configuration.
let sampleConfigFolder: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Config")
