import Configuration
import Directory
import Feeds
import FeedState
import Foundation
import XCTest

/// Tests/Fixtures/feeds, found from this file's path.
let feedFixtures = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/feeds").path

/// Debian's python3 (scripts/install-deps installs it), else the first on PATH.
let python3: String = {
    if FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") { return "/usr/bin/python3" }
    for folder in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
        let candidate = "\(folder)/python3"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return "/usr/bin/python3"
}()

enum FeedTestError: Error { case failed(String) }

/// Runs a program to completion; stdout and stderr go through files.
@discardableResult
func runProgram(_ executable: String, _ arguments: [String], environment: [String: String] = [:], timeout: Double = 60) throws -> (status: Int32, stdout: String, stderr: String) {
    let folder = FileManager.default.temporaryDirectory.path
    let id = UUID().uuidString
    let outPath = "\(folder)/feedtest-\(id).out", errPath = "\(folder)/feedtest-\(id).err"
    _ = FileManager.default.createFile(atPath: outPath, contents: nil)
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    defer {
        try? FileManager.default.removeItem(atPath: outPath)
        try? FileManager.default.removeItem(atPath: errPath)
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    for (k, v) in environment { env[k] = v }
    process.environment = env
    let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = out
    process.standardError = err
    let done = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in done.signal() }
    try process.run()
    try? out.close()
    try? err.close()
    if done.wait(timeout: .now() + timeout) == .timedOut {
        kill(process.processIdentifier, SIGKILL)
        _ = done.wait(timeout: .now() + 5)
        throw FeedTestError.failed("\(executable) \(arguments) did not finish within \(timeout) s")
    }
    while process.isRunning { usleep(1000) }
    return (process.terminationStatus,
            String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self),
            String(decoding: FileManager.default.contents(atPath: errPath) ?? Data(), as: UTF8.self))
}

/// One request the feed server saw.
struct ServedRequest {
    var path: String
    var status: Int
    var ifNoneMatch: String?
    var ifModifiedSince: String?
    var bytes: Int
}

/// Tests/Fixtures/feeds/feed-server.py on 127.0.0.1, serving the files of `root`.
/// Stopped by PID (SIGTERM, then SIGKILL).
final class FeedServer {
    let root: String
    let process = Process()
    private(set) var port: UInt16 = 0
    private let outPath: String

    init(root: String) throws {
        self.root = root
        outPath = root + "/../feed-server.out"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: python3)
        process.arguments = [feedFixtures + "/feed-server.py", root]
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        process.standardOutput = out
        process.standardError = out
        process.standardInput = FileHandle.nullDevice
        try process.run()
        try? out.close()
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            let text = String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("PORT ") }), let p = UInt16(line.dropFirst(5)) {
                port = p
                return
            }
            guard process.isRunning else { break }
            usleep(20_000)
        }
        stop()
        throw FeedTestError.failed("the feed server did not start: \(String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self))")
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)/\(path)" }

    /// Writes a file the server serves; a new mtime each time (Last-Modified changes).
    @discardableResult
    func publish(_ name: String, _ text: String) -> String { publish(name, Data(text.utf8)) }

    @discardableResult
    func publish(_ name: String, _ data: Data) -> String {
        let path = root + "/" + name
        _ = FileManager.default.createFile(atPath: path, contents: data)
        // Whole-second Last-Modified: move the mtime forward so a republished file is newer.
        let bump = Date().addingTimeInterval(Double(publishCount))
        publishCount += 1
        try? FileManager.default.setAttributes([.modificationDate: bump], ofItemAtPath: path)
        return path
    }

    private var publishCount = 0

    var requests: [ServedRequest] {
        let text = String(decoding: FileManager.default.contents(atPath: root + "/requests.log") ?? Data(), as: UTF8.self)
        return text.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return ServedRequest(path: object["path"] as? String ?? "", status: object["status"] as? Int ?? 0,
                                 ifNoneMatch: object["if-none-match"] as? String, ifModifiedSince: object["if-modified-since"] as? String,
                                 bytes: object["bytes"] as? Int ?? 0)
        }
    }

    func clearLog() { try? FileManager.default.removeItem(atPath: root + "/requests.log") }

    func stop() {
        guard process.isRunning else { return }
        let pid = process.processIdentifier
        kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }
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
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("lkd-feed-\(UUID().uuidString.prefix(8))").path
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
        directory.forEachEntry { entry in
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
