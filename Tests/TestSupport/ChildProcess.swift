import CTestSupport
import Foundation
import Glibc

// Every program a test starts goes through here, so that none can outlive
// the test process and no wait on one can block a run: a child's state is
// read without blocking, every wait has a deadline, and a child still
// running when its status is asked for reports -1 instead of stopping the
// process (Foundation's `Process.terminationStatus` does that).

public enum TestSupportError: Error, CustomStringConvertible {
    case failed(String)
    public var description: String {
        switch self {
        case .failed(let text): return text
        }
    }
}

/// A child process whose output goes to files (a full pipe can never block
/// it), in a process group of its own that dies with the test process.
/// Stopped by PID (and its group); `stop()` may be called any number of times.
public final class ChildProcess: @unchecked Sendable {
    public let name: String
    public let stdoutPath: String
    public let stderrPath: String
    public let pid: Int32
    private let lock = NSLock()
    private var waitStatus: Int32?

    /// Starts `executable` with `arguments` in `currentDirectory` (else
    /// `folder`), its environment this process's plus `environment` minus
    /// `unsetting`; stdout and stderr go to new files in `folder`, stdin comes
    /// from the file `input` (else /dev/null).
    public init(executable: String, arguments: [String], folder: String, name: String,
                environment: [String: String] = [:], unsetting: [String] = [], currentDirectory: String? = nil,
                input: String? = nil) throws {
        self.name = name
        let id = String(UUID().uuidString.prefix(8))
        stdoutPath = "\(folder)/\(name)-\(id).out"
        stderrPath = "\(folder)/\(name)-\(id).err"
        let out = open(stdoutPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        let err = open(stderrPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        let inp = open(input ?? "/dev/null", O_RDONLY | O_CLOEXEC)
        defer { for fd in [out, err, inp] where fd >= 0 { close(fd) } }
        guard out >= 0, err >= 0, inp >= 0 else {
            throw TestSupportError.failed("\(name): cannot open its output files in \(folder) or its input \(input ?? "/dev/null"): \(String(cString: strerror(errno)))")
        }
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        for key in unsetting { env.removeValue(forKey: key) }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        let directory = strdup(currentDirectory ?? folder)
        let path = strdup(executable)
        defer {
            for p in argv + envp { free(p) }
            free(directory)
            free(path)
        }
        let started = argv.withUnsafeBufferPointer { argvBuffer in
            envp.withUnsafeBufferPointer { envpBuffer in
                var request = lookupd_test_spawn_request(path: path, argv: argvBuffer.baseAddress, envp: envpBuffer.baseAddress,
                                                         directory: directory, input: inp, output: out, error: err)
                return lookupd_test_spawn(&request)
            }
        }
        guard started > 0 else {
            throw TestSupportError.failed("cannot start \(executable): \(String(cString: strerror(-started)))")
        }
        pid = started
    }

    deinit {
        // A child nobody stopped: it must not run on after its test.
        if reap() == nil { kill(-pid, SIGKILL); kill(pid, SIGKILL); _ = wait(timeout: 5) }
    }

    /// The raw wait status once the child has exited (reaped here, once).
    @discardableResult
    private func reap() -> Int32? {
        lock.lock()
        defer { lock.unlock() }
        if let waitStatus { return waitStatus }
        // Whatever the program left behind in its group goes with it.
        var status: Int32 = 0
        switch lookupd_test_reap(pid, &status) {
        case 1: waitStatus = status
        // Reaped by someone else (nothing here does that): gone, status unknown; reported as 127.
        case -ECHILD: waitStatus = 127 << 8
        default: return nil
        }
        return waitStatus
    }

    /// Waits for the exit; true if it happened within `timeout` seconds.
    @discardableResult
    public func wait(timeout: Double) -> Bool {
        let deadline = monotonicSeconds() + timeout
        while true {
            if reap() != nil { return true }
            let left = deadline - monotonicSeconds()
            if left <= 0 { return false }
            lookupd_test_await_exit(pid, Int32(min(100, max(1, (left * 1000).rounded(.up)))))
        }
    }

    public var isRunning: Bool { reap() == nil }

    /// Exit status, or the signal number when killed by a signal; -1 while it
    /// is still running.
    public var status: Int32 {
        guard let raw = reap() else { return -1 }
        return raw & 0x7f == 0 ? (raw >> 8) & 0xff : raw & 0x7f
    }

    /// True once it has exited by itself (not by a signal).
    public var exitedNormally: Bool { reap().map { $0 & 0x7f == 0 } ?? false }

    /// True once a signal has ended it.
    public var killedBySignal: Bool { reap().map { $0 & 0x7f != 0 && $0 & 0x7f != 0x7f } ?? false }

    /// What happened to it, for failure messages.
    public var state: String {
        guard reap() != nil else { return "still running (pid \(pid))" }
        return exitedNormally ? "exit status \(status)" : "killed by signal \(status)"
    }

    public func signal(_ number: Int32) {
        lock.lock()
        defer { lock.unlock() }
        if waitStatus == nil { kill(pid, number) }
    }

    /// SIGTERM (and SIGCONT, should it be stopped), then SIGKILL to it and
    /// its group if it has not exited within `grace` seconds. True once it is
    /// gone.
    @discardableResult
    public func stop(grace: Double = 5) -> Bool {
        guard isRunning else { return true }
        signal(SIGTERM)
        signal(SIGCONT)
        if wait(timeout: grace) { return true }
        lock.lock()
        if waitStatus == nil { kill(-pid, SIGKILL); kill(pid, SIGKILL) }
        lock.unlock()
        return wait(timeout: 10)
    }

    public var stdout: String { readText(stdoutPath) }
    public var stderr: String { readText(stderrPath) }
}

public func readText(_ path: String) -> String {
    String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
}

/// A program run to its end.
public struct RunResult {
    public var status: Int32
    public var stdout: String
    public var stderr: String
    /// It overran its deadline and was killed.
    public var timedOut: Bool
    /// It exited by itself (not killed by a signal).
    public var exitedNormally: Bool

    public init(status: Int32, stdout: String, stderr: String, timedOut: Bool = false, exitedNormally: Bool = true) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
        self.timedOut = timedOut
        self.exitedNormally = exitedNormally
    }

    public var summary: String {
        "\(exitedNormally ? "exit" : "killed by signal") \(status)\(timedOut ? " (killed after timeout)" : "")\nstdout:\n\(stdout)\nstderr:\n\(stderr)"
    }

    public var stdoutLines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init) }
}

/// Runs a program to completion, killing it after `timeout` seconds; its
/// output passes through files in `folder`, removed afterwards.
public func runCommand(_ executable: String, _ arguments: [String], folder: String, timeout: Double = 60,
                       environment: [String: String] = [:], unsetting: [String] = [], currentDirectory: String? = nil,
                       input: [UInt8]? = nil) throws -> RunResult {
    var inputPath: String?
    if let input {
        let path = "\(folder)/stdin-\(UUID().uuidString.prefix(8))"
        guard FileManager.default.createFile(atPath: path, contents: Data(input)) else {
            throw TestSupportError.failed("cannot write \(path)")
        }
        inputPath = path
    }
    defer { if let inputPath { try? FileManager.default.removeItem(atPath: inputPath) } }
    let child = try ChildProcess(executable: executable, arguments: arguments, folder: folder,
                                 name: URL(fileURLWithPath: executable).lastPathComponent, environment: environment,
                                 unsetting: unsetting, currentDirectory: currentDirectory, input: inputPath)
    var timedOut = false
    if !child.wait(timeout: timeout) {
        timedOut = true
        child.stop(grace: 1)
    }
    let result = RunResult(status: child.status, stdout: child.stdout, stderr: child.stderr, timedOut: timedOut,
                           exitedNormally: child.exitedNormally)
    try? FileManager.default.removeItem(atPath: child.stdoutPath)
    try? FileManager.default.removeItem(atPath: child.stderrPath)
    return result
}

/// The guardian that sweeps the test's process groups when it ends (0 before
/// the first child).
public var childGuardianPID: Int32 { lookupd_test_guardian() }

/// The PID of a child that has exited and been reaped: no process has it now (until the
/// kernel hands it out again, which takes a whole cycle of the PID space).
public func deadProcessID() throws -> Int32 {
    let child = try ChildProcess(executable: "/bin/true", arguments: [], folder: FileManager.default.temporaryDirectory.path, name: "true")
    defer {
        try? FileManager.default.removeItem(atPath: child.stdoutPath)
        try? FileManager.default.removeItem(atPath: child.stderrPath)
    }
    guard child.wait(timeout: 30) else {
        child.stop(grace: 1)
        throw TestSupportError.failed("/bin/true did not exit within 30 s")
    }
    return child.pid
}
