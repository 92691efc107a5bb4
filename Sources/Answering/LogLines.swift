import Configuration

/// Log lines as bytes, ready to be written: journald lines with the sd-daemon priority prefix
/// `<N>` (3 error ... 7 debug), which journald turns into the priority and strips, key=value
/// fields with values quoted when they need it; and the decision-log lines for the log file and
/// for the status page's recent calls. Filling them is Answering's; writing them is the
/// daemon's (`LogBuffer.flush`), once per batch, so logging costs no system call per call.
///
/// Threading: belongs to one thread (a worker fills its own).
public struct LogLines {
    public let level: LogLevel
    /// Whether decision lines also go to a log file (`log-file`).
    public let writesFile: Bool
    /// Whether blocked and identified calls' lines are kept for the status page.
    public let keepsRecent: Bool
    public private(set) var bytes: [UInt8] = []
    /// Decision-log lines for the log file, without priority prefixes.
    public private(set) var fileBytes: [UInt8] = []
    /// Blocked and identified calls' lines, and where each line ends.
    public private(set) var recentBytes: [UInt8] = []
    public private(set) var recentEnds: [Int] = []

    public init(level: LogLevel, writesFile: Bool = false, keepsRecent: Bool = false) {
        self.level = level
        self.writesFile = writesFile
        self.keepsRecent = keepsRecent
        bytes.reserveCapacity(1 << 14)
    }

    public var isEmpty: Bool { bytes.isEmpty && fileBytes.isEmpty && recentEnds.isEmpty }

    /// After the lines were written.
    public mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        fileBytes.removeAll(keepingCapacity: true)
        if !recentEnds.isEmpty {
            recentBytes.removeAll(keepingCapacity: true)
            recentEnds.removeAll(keepingCapacity: true)
        }
    }

    /// One decision-log line: to standard error when `level` is enabled, and to the log file
    /// (when one is configured) whatever the level. `recent`: a blocked or identified call,
    /// which the status page lists.
    public mutating func decision(_ l: LogLevel, _ line: UnsafeRawBufferPointer, recent: Bool = false) {
        if enabled(l) {
            begin(l)
            bytes.append(contentsOf: line)
            end()
        }
        if writesFile {
            fileBytes.append(contentsOf: line)
            fileBytes.append(0x0A)
        }
        if recent && keepsRecent {
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

    /// ` key=value`, with the value quoted and escaped when it holds spaces, quotes,
    /// backslashes, `=` or control characters; empty values as `""`.
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
    public mutating func appendRaw(_ raw: UnsafeRawBufferPointer) { bytes.append(contentsOf: raw) }
}
