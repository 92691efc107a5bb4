import Configuration
import Glibc
import SystemCalls

/// Log lines for journald: each starts with the sd-daemon priority prefix
/// `<N>` (3 error ... 7 debug), which journald turns into the priority and
/// strips. Lines are key=value, values quoted when they need it.
///
/// Threading: a `LogBuffer` belongs to one thread; workers fill theirs
/// while answering a batch and flush it with one write(2) afterwards, so
/// logging costs no syscall per call.
public struct LogBuffer {
    public let level: LogLevel
    private(set) var bytes: [UInt8] = []
    private let fd: Int32
    /// When set, `flush` hands the lines to the log writer thread instead
    /// of writing them itself (docs/OPERATIONS.md: logging never blocks a worker).
    let sink: LogSink?
    /// Decision-log lines for the log file, without priority prefixes.
    private var fileBytes: [UInt8] = []
    /// Blocked and identified calls' lines for the status page's recent calls
    /// (only when the sink keeps them), and where each line ends.
    private var recentBytes: [UInt8] = []
    private var recentEnds: [Int] = []

    public init(level: LogLevel, fd: Int32 = 2) {
        self.level = level
        self.fd = fd
        self.sink = nil
        bytes.reserveCapacity(1 << 14)
    }

    init(level: LogLevel, sink: LogSink?) {
        self.level = level
        self.fd = 2
        self.sink = sink
        bytes.reserveCapacity(1 << 14)
    }

    /// One decision-log line: to standard error when `level` is enabled, and
    /// to the log file (when one is configured) whatever the level. `recent`:
    /// a blocked or identified call, which the status page lists.
    mutating func decision(_ l: LogLevel, _ line: [UInt8], recent: Bool = false) {
        if enabled(l) {
            begin(l)
            bytes.append(contentsOf: line)
            end()
        }
        guard let sink else { return }
        if sink.settings != nil {
            fileBytes.append(contentsOf: line)
            fileBytes.append(0x0A)
        }
        if recent && sink.keepsRecent {
            recentBytes.append(contentsOf: line)
            recentEnds.append(recentBytes.count)
        }
    }

    @inline(__always)
    public func enabled(_ l: LogLevel) -> Bool { l <= level }

    public mutating func begin(_ l: LogLevel) {
        bytes.append(UInt8(ascii: "<"))
        bytes.append(UInt8(ascii: "0") + UInt8(l.rawValue))
        bytes.append(UInt8(ascii: ">"))
    }

    public mutating func text(_ s: StaticString) {
        bytes.append(contentsOf: UnsafeRawBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    public mutating func text(_ s: String) { bytes.append(contentsOf: s.utf8) }

    /// ` key=value`, with the value quoted and escaped when it holds spaces,
    /// quotes, backslashes, `=` or control characters; empty values as `""`.
    public mutating func field(_ key: StaticString, _ value: UnsafeRawBufferPointer) {
        bytes.append(0x20)
        text(key)
        bytes.append(UInt8(ascii: "="))
        DecisionLine.appendTextValue(value, to: &bytes)
    }

    public mutating func field(_ key: StaticString, _ value: String) {
        var value = value
        value.withUTF8 { field(key, UnsafeRawBufferPointer($0)) }
    }

    public mutating func end() { bytes.append(0x0A) }

    /// Bytes already escaped by their builder (a `DecisionLine`).
    mutating func appendRaw(_ raw: [UInt8]) { bytes.append(contentsOf: raw) }

    public mutating func flush() {
        if let sink {
            guard !bytes.isEmpty || !fileBytes.isEmpty || !recentEnds.isEmpty else { return }
            bytes.withUnsafeBytes { b in
                fileBytes.withUnsafeBytes { f in sink.submit(stderr: b, file: f, recent: recentBytes, ends: recentEnds) }
            }
            bytes.removeAll(keepingCapacity: true)
            fileBytes.removeAll(keepingCapacity: true)
            if !recentEnds.isEmpty {
                recentBytes.removeAll(keepingCapacity: true)
                recentEnds.removeAll(keepingCapacity: true)
            }
            return
        }
        guard !bytes.isEmpty else { return }
        // stderr gone: nothing sensible left to do with a log line.
        try? FileDescriptor(rawValue: fd).writeAll(bytes)
        bytes.removeAll(keepingCapacity: true)
    }

    /// One whole message line, flushed at once (for rare events).
    public mutating func message(_ l: LogLevel, _ text: String) {
        guard enabled(l) else { return }
        begin(l)
        self.text(text)
        end()
        flush()
    }
}

/// Shared logger for rare events from any thread (start, reload, errors):
/// builds a line and writes it with one call.
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
