@_exported import TestSupport
import Configuration
import Directory
import Feeds
import FeedRecords
import Foundation
import XCTest

/// Tests/Fixtures/feeds.
let feedFixtures = fixturesDirectory.appendingPathComponent("feeds").path

enum FeedTestError: Error { case failed(String) }

/// Runs a program to completion (its output through files in the temporary
/// folder); one that overruns `timeout` is killed and reported as an error.
@discardableResult
func runProgram(_ executable: String, _ arguments: [String], environment: [String: String] = [:], timeout: Double = 60) throws -> RunResult {
    let result = try runCommand(executable, arguments, folder: FileManager.default.temporaryDirectory.path, timeout: timeout, environment: environment)
    if result.timedOut { throw FeedTestError.failed("\(executable) \(arguments) did not finish within \(timeout) s") }
    return result
}

/// Base class: a temporary folder, a feed server publishing from `folder/www`, a state
/// directory, and helpers to write configurations and run updates through the library.
class FeedTestCase: XCTestCase {
    var folder: String!
    var server: FeedServer!
    var logs: [(FeedLogLevel, String)] = []
    var reloads = 0

    override func setUpWithError() throws {
        try super.setUpWithError()
        folder = try makeTemporaryFolder("lkd-feed")
        try FileManager.default.createDirectory(atPath: folder + "/www", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: folder + "/state", withIntermediateDirectories: true)
        server = try FeedServer(root: folder + "/www")
    }

    override func tearDown() {
        server?.stop()
        if let folder {
            if (testRun?.totalFailureCount ?? 0) > 0 {
                print("--- update log ---\n" + logs.map { "\($0.0): \($0.1)" }.joined(separator: "\n"))
            }
            try? FileManager.default.removeItem(atPath: folder)
        }
        super.tearDown()
    }

    func path(_ name: String) -> String { folder + "/" + name }

    @discardableResult
    func write(_ name: String, _ text: String) -> String {
        _ = FileManager.default.createFile(atPath: path(name), contents: Data(text.utf8))
        return path(name)
    }

    /// A configuration with the given `feed =` lines (and a control socket nobody listens on).
    func config(_ feedLines: [String], extra: [String] = []) throws -> LookupdConfig {
        let text = (["state-directory = \(path("state"))", "control-socket = \(path("none.sock"))"] + feedLines.map { "feed = " + $0 } + extra)
            .joined(separator: "\n") + "\n"
        let configPath = write("lookupd.conf", text)
        return try ConfigParser.parse(text, path: configPath)
    }

    /// Runs an update through the library; the reloader counts calls and says no daemon runs.
    @discardableResult
    func update(_ config: LookupdConfig, feeds: [String] = [], force: Bool = false, allowShrink: Bool = false) throws -> FeedUpdateResult {
        var options = FeedUpdateOptions()
        options.feeds = feeds
        options.force = force
        options.allowShrink = allowShrink
        return try makeUpdater(config).update(options)
    }

    func makeUpdater(_ config: LookupdConfig) -> FeedUpdater {
        FeedUpdater(config: config, log: { [unowned self] level, message in self.logs.append((level, message)) },
                    reloader: { [unowned self] in
                        self.reloads += 1
                        return .noDaemon("test")
                    })
    }

    var errors: [String] { logs.filter { $0.0 == .error }.map(\.1) }

    func record(_ feed: String) -> FeedRecord? { FeedRecordStore(stateDirectory: path("state")).read(feed) }

    /// Every entry of a directory file as "number action label".
    func entries(_ file: String) throws -> [String] {
        let directory = try DirectoryFile(path: file)
        try directory.verify()
        var lines: [String] = []
        try directory.forEachEntry { entry in
            lines.append("\(entry.match) \(entry.blocked ? "block" : "identify") \(entry.label.map { directory.label($0) } ?? "")")
        }
        return lines
    }

    func header(_ file: String) throws -> DirectoryHeader { try DirectoryFile(path: file).header }

    /// Device, inode and mtime: "the file was not touched".
    func identity(_ file: String) -> [Int] {
        var st = stat()
        guard stat(file, &st) == 0 else { return [] }
        return [Int(st.st_dev), Int(st.st_ino), st.st_mtim.tv_sec, st.st_mtim.tv_nsec]
    }

    /// Packs with Tests/Fixtures/feeds/make-archive.py.
    func pack(_ arguments: [String]) throws {
        let result = try runProgram(python3, [feedFixtures + "/make-archive.py"] + arguments)
        guard result.status == 0 else { throw FeedTestError.failed("make-archive.py \(arguments): \(result.stderr)") }
    }

    /// A CSV list of `count` blocked numbers starting at +8613900000000 (+ offset).
    func csvList(_ count: Int, offset: Int = 0, label: String = "Spam") -> String {
        var text = "number,action,label\n"
        for i in 0..<count { text += "+86139\(String(format: "%08d", i + offset)),block,\(label)\n" }
        return text
    }
}
