import SystemCalls
import Glibc

/// The sd_notify protocol without libsystemd: one datagram per message to
/// the AF_UNIX socket named by $NOTIFY_SOCKET (an abstract socket when the
/// name starts with '@'). Does nothing when not started by systemd.
///
/// Threading: immutable after init; `send` may be called from any thread.
public final class SystemdNotifier: @unchecked Sendable {
    private let fd: Int32
    private let socketPath: String
    /// From $WATCHDOG_USEC: how often systemd expects WATCHDOG=1, nil when off.
    public let watchdogInterval: Double?

    public init() {
        var interval: Double? = nil
        if let usec = getenv("WATCHDOG_USEC").flatMap({ UInt64(String(cString: $0)) }), usec > 0 {
            let pid = getenv("WATCHDOG_PID").flatMap { Int32(String(cString: $0)) }
            if pid == nil || pid == getpid() { interval = Double(usec) / 1e6 }
        }
        watchdogInterval = interval
        socketPath = getenv("NOTIFY_SOCKET").map { String(cString: $0) } ?? ""
        fd = socketPath.isEmpty ? -1 : socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    }

    deinit { if fd >= 0 { close(fd) } }

    public var isActive: Bool { fd >= 0 }

    /// Sends newline-separated assignments, e.g. "READY=1\nSTATUS=serving".
    public func send(_ state: String) {
        guard fd >= 0 else { return }
        var state = state
        state.withUTF8 { bytes in
            _ = try? UnixAddress.with(socketPath) { address, length in
                sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), address, length)
            }
        }
    }

    /// RELOADING=1 must carry the monotonic time in µs (systemd 253+ with
    /// Type=notify-reload checks it; older ones ignore it).
    public func reloading() {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let usec = UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
        send("RELOADING=1\nMONOTONIC_USEC=\(usec)\nSTATUS=reloading")
    }
}
