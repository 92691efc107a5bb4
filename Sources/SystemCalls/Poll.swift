import CSystemCalls
import Glibc

/// One readiness report of `Poll.wait` (`struct epoll_event`).
public typealias PollEvent = epoll_event

extension PollEvent {
    /// The descriptor the event is about (registered as its data).
    @inlinable public var descriptor: Int32 { data.fd }
    /// Its `Poll` flags.
    @inlinable public var flags: UInt32 { events }
}

/// epoll(7) and eventfd(2) for the daemon's event loops. Descriptors stay `Int32`: they are
/// handed between a loop and the connections it watches.
public enum Poll {
    public static let readable = EPOLLIN.rawValue
    public static let writable = EPOLLOUT.rawValue
    public static let peerClosed = EPOLLRDHUP.rawValue
    public static let hangUp = EPOLLHUP.rawValue
    public static let error = EPOLLERR.rawValue

    /// A new epoll instance (close-on-exec).
    public static func create() throws(Errno) -> Int32 {
        try retrying(.open, nil) { epoll_create1(Int32(EPOLL_CLOEXEC)) }
    }

    /// Watches `fd` for `events`; false when the kernel refused (a descriptor already watched,
    /// or one that cannot be polled).
    @discardableResult
    public static func add(_ epfd: Int32, _ fd: Int32, _ events: UInt32) -> Bool {
        var event = epoll_event(events: events, data: epoll_data_t(fd: fd))
        return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event) == 0
    }

    @discardableResult
    public static func modify(_ epfd: Int32, _ fd: Int32, _ events: UInt32) -> Bool {
        var event = epoll_event(events: events, data: epoll_data_t(fd: fd))
        return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &event) == 0
    }

    public static func remove(_ epfd: Int32, _ fd: Int32) {
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nil)
    }

    /// Waits up to `timeout` milliseconds (-1: no limit) and fills `events`: the count ready,
    /// 0 on a timeout or an interrupting signal.
    @inlinable
    public static func wait(_ epfd: Int32, _ events: inout [PollEvent], timeout: Int32) -> Int {
        let n = events.withUnsafeMutableBufferPointer { epoll_wait(epfd, $0.baseAddress, Int32($0.count), timeout) }
        return n > 0 ? Int(n) : 0
    }

    /// An eventfd (non-blocking, close-on-exec): a wake-up another thread can post.
    public static func makeEventCounter() throws(Errno) -> Int32 {
        try retrying(.open, nil) { eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC)) }
    }

    /// Posts one wake-up on an eventfd.
    public static func post(_ eventFD: Int32) {
        var one: UInt64 = 1
        _ = Glibc.write(eventFD, &one, 8)
    }

    /// Takes every pending wake-up of an eventfd.
    public static func drain(_ eventFD: Int32) {
        var value: UInt64 = 0
        _ = Glibc.read(eventFD, &value, 8)
    }
}

/// The signals a thread takes through a descriptor (signalfd(2)) instead of handlers.
public struct SignalDescriptor: Sendable {
    public let fd: Int32

    /// Blocks `signals` in the calling thread (threads it starts later inherit the mask, so
    /// only this descriptor sees them) and opens a non-blocking descriptor reading them.
    public init(blocking signals: [Int32]) throws(Errno) {
        var set = sigset_t()
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        fd = try retrying(.open, nil) { signalfd(-1, &set, Int32(SFD_NONBLOCK) | Int32(SFD_CLOEXEC)) }
    }

    /// The signals received since the last call, in order.
    public func pending() -> [Int32] {
        var received: [Int32] = []
        var info = signalfd_siginfo()
        while Glibc.read(fd, &info, MemoryLayout<signalfd_siginfo>.size) == MemoryLayout<signalfd_siginfo>.size {
            received.append(Int32(info.ssi_signo))
        }
        return received
    }

    public func close() { _ = Glibc.close(fd) }
}
