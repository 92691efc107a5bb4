import Foundation
import Glibc
import XCTest

// Shared plumbing for the daemon integration tests: where things are, running
// processes with deadlines, temporary folders and free loopback ports.

/// Tests/Fixtures, found from this file's path (no resource bundles).
let fixturesDirectory: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent()   // DaemonTests
    .deletingLastPathComponent()   // Tests
    .appendingPathComponent("Fixtures")

let tortureDirectory = fixturesDirectory.appendingPathComponent("sip-torture")
let scenarioDirectory = fixturesDirectory.appendingPathComponent("sipp")

/// The `lookupd` executable: $LOOKUPD_BINARY, else next to the test bundle
/// (`.build/<config>/lookupd`, built with the tests or by
/// `swift build --product lookupd`).
enum LookupdBinary {
    static let candidates: [String] = {
        if let explicit = ProcessInfo.processInfo.environment["LOOKUPD_BINARY"], !explicit.isEmpty {
            return [explicit]
        }
        var folders: [String] = []
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            folders.append(URL(fileURLWithPath: bundle.bundlePath).deletingLastPathComponent().path)
        }
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        let argv0Folder = url.deletingLastPathComponent().path
        while url.path != "/" {
            if url.pathExtension == "xctest" { folders.append(url.deletingLastPathComponent().path) }
            url = url.deletingLastPathComponent()
        }
        folders.append(argv0Folder)
        var seen = Set<String>()
        return folders.filter { seen.insert($0).inserted }.map { $0 + "/lookupd" }
    }()

    static let path: String? = candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// sipp (Debian sip-tester). CI installs it with scripts/install-deps.
enum SippBinary {
    static let path: String? = {
        if let explicit = ProcessInfo.processInfo.environment["SIPP_BINARY"], !explicit.isEmpty {
            return FileManager.default.isExecutableFile(atPath: explicit) ? explicit : nil
        }
        for folder in ["/usr/bin", "/usr/local/bin", "/usr/sbin"] + (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init) {
            let candidate = folder + "/sipp"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }()
}

enum HarnessError: Error, CustomStringConvertible {
    case missing(String)
    case failed(String)

    var description: String {
        switch self {
        case .missing(let s): return "\(s) not found"
        case .failed(let s): return s
        }
    }
}

// MARK: - Processes

/// A child process whose output goes to files (a full pipe can never block it).
/// Stopped by PID only; `stop()` is idempotent.
final class ChildProcess: @unchecked Sendable {
    let process = Process()
    let name: String
    let stdoutPath: String
    let stderrPath: String
    private let exited = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var finished = false

    init(executable: String, arguments: [String], folder: String, name: String,
         environment: [String: String] = [:], currentDirectory: String? = nil) throws {
        self.name = name
        let id = String(UUID().uuidString.prefix(8))
        stdoutPath = "\(folder)/\(name)-\(id).out"
        stderrPath = "\(folder)/\(name)-\(id).err"
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        process.environment = env
        process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory ?? folder)
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = err
        let semaphore = exited
        process.terminationHandler = { _ in semaphore.signal() }
        try process.run()
        try? out.close()
        try? err.close()
    }

    var pid: Int32 { process.processIdentifier }

    /// Waits for the exit; true if it happened within `timeout` seconds.
    func wait(timeout: Double) -> Bool {
        lock.lock()
        if finished { lock.unlock(); return true }
        lock.unlock()
        guard exited.wait(timeout: .now() + timeout) == .success else { return false }
        lock.lock()
        finished = true
        lock.unlock()
        // terminationHandler may run before the status is published.
        let deadline = Date().addingTimeInterval(2)
        while process.isRunning && Date() < deadline { usleep(1000) }
        return true
    }

    var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        return !finished && process.isRunning
    }

    /// Exit status (or signal number when killed by a signal).
    var status: Int32 { process.terminationStatus }
    var exitedNormally: Bool { process.terminationReason == .exit }

    func signal(_ number: Int32) {
        if isRunning { kill(pid, number) }
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace` seconds.
    func stop(grace: Double = 5) {
        guard isRunning else { _ = wait(timeout: 1); return }
        kill(pid, SIGTERM)
        if !wait(timeout: grace) {
            kill(pid, SIGKILL)
            _ = wait(timeout: 5)
        }
    }

    var stdout: String { readText(stdoutPath) }
    var stderr: String { readText(stderrPath) }
}

func readText(_ path: String) -> String {
    String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
}

struct RunResult {
    var status: Int32
    var stdout: String
    var stderr: String
    var timedOut: Bool
    var summary: String { "exit \(status)\(timedOut ? " (killed after timeout)" : "")\nstdout:\n\(stdout)\nstderr:\n\(stderr)" }
}

/// Runs a command to completion (killing it after `timeout` seconds).
func runCommand(_ executable: String, _ arguments: [String], folder: String, timeout: Double = 60,
         environment: [String: String] = [:]) throws -> RunResult {
    let child = try ChildProcess(executable: executable, arguments: arguments, folder: folder,
                                 name: URL(fileURLWithPath: executable).lastPathComponent, environment: environment)
    var timedOut = false
    if !child.wait(timeout: timeout) {
        timedOut = true
        child.stop(grace: 1)
    }
    let result = RunResult(status: child.status, stdout: child.stdout, stderr: child.stderr, timedOut: timedOut)
    try? FileManager.default.removeItem(atPath: child.stdoutPath)
    try? FileManager.default.removeItem(atPath: child.stderrPath)
    return result
}

// MARK: - Temporary folders

/// A fresh folder under /tmp with a short path (the control socket path must
/// fit in sun_path), removed by `remove()`.
func makeTemporaryFolder(_ prefix: String) throws -> String {
    let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.count < 40 ? $0 : nil } ?? "/tmp"
    var template = Array("\(base.hasSuffix("/") ? String(base.dropLast()) : base)/\(prefix)-XXXXXX".utf8CString)
    guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
        throw HarnessError.failed("mkdtemp: \(String(cString: strerror(errno)))")
    }
    return String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
}

// MARK: - Ports

/// A port free for both UDP and TCP on 127.0.0.1 right now (bind port 0, close).
/// Someone may take it before we use it: callers retry on EADDRINUSE.
func freeLoopbackPort() -> UInt16 {
    for _ in 0..<50 {
        let tcp = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(tcp) }
        guard bindLoopback(tcp, ip: "127.0.0.1", port: 0) else { continue }
        let port = boundPort(tcp)
        let udp = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(udp) }
        if bindLoopback(udp, ip: "127.0.0.1", port: port) { return port }
    }
    fatalError("no free loopback port")
}

func socketAddress(_ ip: String, _ port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    precondition(inet_pton(AF_INET, ip, &address.sin_addr) == 1, "bad IPv4 address \(ip)")
    precondition(ip.hasPrefix("127."), "tests only ever talk to loopback, not \(ip)")
    return address
}

func bindLoopback(_ fd: Int32, ip: String, port: UInt16) -> Bool {
    var address = socketAddress(ip, port)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

func boundPort(_ fd: Int32) -> UInt16 {
    var address = sockaddr_in()
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return UInt16(bigEndian: address.sin_port)
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes.
@discardableResult
func eventually(timeout: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = monotonicSeconds() + timeout
    repeat {
        if try condition() { return true }
        usleep(20_000)
    } while monotonicSeconds() < deadline
    return try condition()
}
