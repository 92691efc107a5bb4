import Foundation
import XCTest

/// Where the `lookupd` executable built with the tests lives.
enum LookupdBinary {
    /// Every place looked at, for the error message.
    static let candidates: [String] = {
        var folders: [String] = []
        if let explicit = ProcessInfo.processInfo.environment["LOOKUPD_BINARY"], !explicit.isEmpty {
            return [explicit]
        }
        // The test bundle sits next to the products: .build/debug/lookupdPackageTests.xctest
        // (an executable on Linux, a bundle folder on macOS).
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            folders.append(URL(fileURLWithPath: bundle.bundlePath).deletingLastPathComponent().path)
        }
        let argv0 = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        var url = argv0
        while url.path != "/" {
            if url.pathExtension == "xctest" { folders.append(url.deletingLastPathComponent().path) }
            url = url.deletingLastPathComponent()
        }
        folders.append(argv0.deletingLastPathComponent().path)
        if let main = Bundle.main.executableURL { folders.append(main.deletingLastPathComponent().path) }
        var seen = Set<String>()
        return folders.filter { seen.insert($0).inserted }.map { $0 + "/lookupd" }
    }()

    static let path: String? = candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
}

struct RunResult {
    var status: Int32
    var stdout: String
    var stderr: String
    var stdoutLines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init) }
}

/// Test fixture: a temporary folder, a config with the default plan, and a way to run lookupd.
class CLITestCase: XCTestCase {
    var folder: URL!
    /// An empty configuration (China plan, no lists), so nothing on the test
    /// machine (/etc/lookupd/lookupd.conf, $LOOKUPD_CONFIG) leaks in.
    var planConfig: String { file("plan.conf") }

    override func setUpWithError() throws {
        guard LookupdBinary.path != nil else {
            XCTFail("the lookupd executable was not found; looked at: \(LookupdBinary.candidates.joined(separator: ", ")). "
                    + "Build it (swift build) or set LOOKUPD_BINARY.")
            throw CLIError.noBinary
        }
        folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("lookupd-cli-\(getpid())-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        write("plan.conf", "# default numbering plan\n")
    }

    override func tearDown() {
        if let folder { try? FileManager.default.removeItem(at: folder) }
    }

    func file(_ name: String) -> String { folder.appendingPathComponent(name).path }

    @discardableResult
    func write(_ name: String, _ text: String) -> String { write(name, Data(text.utf8)) }

    @discardableResult
    func write(_ name: String, _ data: Data) -> String {
        let path = file(name)
        precondition(FileManager.default.createFile(atPath: path, contents: data), "cannot write \(path)")
        return path
    }

    func read(_ path: String) -> Data { FileManager.default.contents(atPath: path) ?? Data() }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// Runs lookupd with `arguments`, feeding `stdin`; output goes through
    /// files so large outputs cannot deadlock on a full pipe.
    func lookupd(_ arguments: [String], stdin: Data = Data(), environment extra: [String: String] = [:],
                 file: StaticString = #filePath, line: UInt = #line) throws -> RunResult {
        guard let binary = LookupdBinary.path else {
            XCTFail("the lookupd executable was not found; looked at: \(LookupdBinary.candidates.joined(separator: ", ")). "
                    + "Build it (swift build) or set LOOKUPD_BINARY.", file: file, line: line)
            throw CLIError.noBinary
        }
        let id = UUID().uuidString
        let inPath = write("stdin-\(id)", stdin)
        let outPath = write("stdout-\(id)", Data())
        let errPath = write("stderr-\(id)", Data())
        defer { for p in [inPath, outPath, errPath] { try? FileManager.default.removeItem(atPath: p) } }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["LOOKUPD_CONFIG"] = planConfig
        for (key, value) in extra { environment[key] = value }
        process.environment = environment
        process.currentDirectoryURL = folder
        let input = try FileHandle(forReadingFrom: URL(fileURLWithPath: inPath))
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let errors = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        defer { try? input.close(); try? output.close(); try? errors.close() }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationReason, .exit, "lookupd \(arguments) was killed by signal \(process.terminationStatus)", file: file, line: line)
        return RunResult(status: process.terminationStatus,
                         stdout: String(decoding: read(outPath), as: UTF8.self),
                         stderr: String(decoding: read(errPath), as: UTF8.self))
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
