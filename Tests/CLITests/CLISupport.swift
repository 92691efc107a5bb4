@_exported import TestSupport
import Foundation
import XCTest

/// Test fixture: a temporary folder, a config with the default plan, and a way to run lookupd.
class CLITestCase: XCTestCase {
    private var workspace: TemporaryFolder!
    var folder: URL! { workspace?.url }
    /// A configuration naming the China plan and no lists, so nothing on the test
    /// machine (/etc/lookupd/lookupd.conf, $LOOKUPD_CONFIG) leaks in.
    var planConfig: String { file("plan.conf") }

    override func setUpWithError() throws {
        guard LookupdBinary.path != nil else {
            XCTFail(lookupdProgram.missing)
            throw CLIError.noBinary
        }
        workspace = TemporaryFolder("lookupd-cli")
        write("plan.conf", "country = CN\n")
    }

    override func tearDown() {
        workspace?.cleanup()
    }

    func file(_ name: String) -> String { workspace.file(name) }

    @discardableResult
    func write(_ name: String, _ text: String) -> String { workspace.write(name, text) }

    @discardableResult
    func write(_ name: String, _ data: Data) -> String { workspace.write(name, data) }

    func read(_ path: String) -> Data { FileManager.default.contents(atPath: path) ?? Data() }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// Runs lookupd with `arguments`, feeding `stdin`; output goes through
    /// files so large outputs cannot deadlock on a full pipe. A run past
    /// `timeout` seconds is killed and fails the test.
    func lookupd(_ arguments: [String], stdin: Data = Data(), environment extra: [String: String] = [:], timeout: Double = 300,
                 file: StaticString = #filePath, line: UInt = #line) throws -> RunResult {
        guard let binary = LookupdBinary.path else {
            XCTFail(lookupdProgram.missing, file: file, line: line)
            throw CLIError.noBinary
        }
        var environment = ["LOOKUPD_CONFIG": planConfig]
        for (key, value) in extra { environment[key] = value }
        let result = try runCommand(binary, arguments, folder: folder.path, timeout: timeout, environment: environment, input: [UInt8](stdin))
        XCTAssertFalse(result.timedOut, "lookupd \(arguments) ran past \(timeout) s and was killed", file: file, line: line)
        XCTAssertTrue(result.exitedNormally, "lookupd \(arguments) was killed by signal \(result.status)", file: file, line: line)
        return result
    }

    /// Compiles CSV text into `name` (in the test folder); fails the test if it does not compile.
    @discardableResult
    func compileCSV(_ csv: String, to name: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let source = write(name + ".csv", csv)
        let output = self.file(name)
        let result = try lookupd(["compile", "--config", planConfig, "-q", source, "-o", output], file: file, line: line)
        XCTAssertEqual(result.status, 0, "compile failed: \(result.stderr)", file: file, line: line)
        return output
    }

    /// Parses one JSON object per line.
    func jsonLines(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> [[String: Any]] {
        text.split(separator: "\n").compactMap { row in
            guard let object = try? JSONSerialization.jsonObject(with: Data(row.utf8)) as? [String: Any] else {
                XCTFail("not a JSON object: \(row)", file: file, line: line)
                return nil
            }
            return object
        }
    }
}

enum CLIError: Error { case noBinary }

/// A JSON value as a String, or "null" for JSON null / a missing key.
func field(_ object: [String: Any], _ key: String) -> String {
    switch object[key] {
    case let s as String: return s
    case is NSNull, nil: return "null"
    case let other?: return "\(other)"
    }
}
