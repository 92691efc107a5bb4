import Answering
import Configuration
import Glibc
import SystemCalls

/// Log lines on their way out: the lines (`LogLines`, filled by Answering or here) and where
/// they go. Workers fill theirs while answering a batch and flush it once afterwards, to the
/// log writer thread (`LogSink`, docs/OPERATIONS.md: logging never blocks a worker) or with
/// one write(2), so logging costs no system call per call.
///
/// Threading: a `LogBuffer` belongs to one thread.
public struct LogBuffer {
    public var lines: LogLines
    private let fd: Int32
    let sink: LogSink?

    public init(level: LogLevel, fd: Int32 = 2) {
        lines = LogLines(level: level)
        self.fd = fd
        self.sink = nil
    }

    init(level: LogLevel, sink: LogSink?) {
        lines = LogLines(level: level, writesFile: sink?.settings != nil, keepsRecent: sink?.keepsRecent ?? false)
        self.fd = 2
        self.sink = sink
    }

    public mutating func flush() {
        if let sink {
            guard !lines.isEmpty else { return }
            lines.bytes.withUnsafeBytes { b in
                lines.fileBytes.withUnsafeBytes { f in sink.submit(stderr: b, file: f, recent: lines.recentBytes, ends: lines.recentEnds) }
            }
            lines.removeAll()
            return
        }
        guard !lines.bytes.isEmpty else { return }
        // stderr gone: nothing sensible left to do with a log line.
        try? FileDescriptor(rawValue: fd).writeAll(lines.bytes)
        lines.removeAll()
    }

    /// One whole message line, flushed at once (for rare events).
    public mutating func message(_ l: LogLevel, _ text: String) {
        guard lines.enabled(l) else { return }
        lines.begin(l)
        lines.text(text)
        lines.end()
        flush()
    }
}

/// Shared logger for rare events from any thread (start, reload, errors):
/// builds a line and writes it with one call.
///
/// Threading: any thread; a line is one write(2), so lines never interleave.
public struct Logger: Sendable {
    public let level: LogLevel

    public init(level: LogLevel) { self.level = level }

    public func log(_ l: LogLevel, _ text: String) {
        var buffer = LogBuffer(level: level)
        buffer.message(l, text)
    }

    public func error(_ text: String) { log(.error, text) }
    public func warning(_ text: String) { log(.warning, text) }
    public func notice(_ text: String) { log(.notice, text) }
    public func info(_ text: String) { log(.info, text) }
}
