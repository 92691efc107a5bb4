import CSystemCalls
import Glibc

/// One message of a `recvmmsg`/`sendmmsg` batch (`struct mmsghdr`).
public typealias MessageHeader = lookupd_mmsghdr

/// The socket calls of the daemon. The batch calls of the UDP hot path are inlined into the
/// worker and return the kernel's result as it is (-1 with errno): the worker's loop decides
/// per errno what to do, and a throwing wrapper would cost it on every batch.
public enum Socket {
    /// recvmmsg(2) with no timeout: the count received, or -1 with errno set.
    @inlinable
    public static func receiveBatch(_ fd: Int32, _ messages: UnsafeMutablePointer<MessageHeader>, count: Int, flags: Int32) -> Int32 {
        lookupd_recvmmsg(fd, messages, UInt32(count), flags)
    }

    /// sendmmsg(2): the count sent, or -1 with errno set.
    @inlinable
    public static func sendBatch(_ fd: Int32, _ messages: UnsafeMutablePointer<MessageHeader>, count: Int, flags: Int32) -> Int32 {
        lookupd_sendmmsg(fd, messages, UInt32(count), flags)
    }

    /// accept4(2), retried on EINTR and ECONNABORTED (a peer that gave up while queued); the
    /// peer's address into `address` when given. EAGAIN (nothing queued) is thrown like any
    /// other errno.
    public static func accept(_ listener: Int32, address: UnsafeMutablePointer<sockaddr_storage>? = nil,
                              flags: Int32 = Int32(SOCK_CLOEXEC.rawValue)) throws(Errno) -> Int32 {
        while true {
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd: Int32
            if let address {
                fd = address.withMemoryRebound(to: sockaddr.self, capacity: 1) { lookupd_accept4(listener, $0, &length, flags) }
            } else {
                fd = lookupd_accept4(listener, nil, nil, flags)
            }
            if fd >= 0 { return fd }
            let e = Errno.current
            if e == .interrupted || e == .connectionAborted { continue }
            throw e
        }
    }

    /// sendto(2), retried on EINTR: the count sent.
    public static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, to address: UnsafePointer<sockaddr>, length: socklen_t,
                            flags: Int32 = Int32(MSG_DONTWAIT)) throws(Errno) -> Int {
        try retrying(.write, nil) { sendto(fd, bytes.baseAddress, bytes.count, flags, address, length) }
    }

    /// send(2) on a connected socket, retried on EINTR: the count sent.
    public static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, flags: Int32 = Int32(MSG_DONTWAIT)) throws(Errno) -> Int {
        try retrying(.write, nil) { Glibc.send(fd, bytes.baseAddress, bytes.count, flags) }
    }

    /// recv(2), retried on EINTR: the count received (with MSG_TRUNC, a datagram's full size).
    public static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, flags: Int32 = Int32(MSG_DONTWAIT)) throws(Errno) -> Int {
        try retrying(.read, nil) { recv(fd, buffer.baseAddress, buffer.count, flags) }
    }

    /// An integer socket option; false when the kernel refused it.
    @discardableResult
    public static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) -> Bool {
        var v = value
        return setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size)) == 0
    }

    /// Makes the SO_REUSEPORT group `fd` belongs to pick a random one of its first `count`
    /// sockets for each datagram instead of hashing the 4-tuple (SO_ATTACH_REUSEPORT_CBPF):
    /// one flow is then shared by every socket. The program is the group's, so one call
    /// through any member serves all; `count` must be the group's size, since an index past
    /// the last socket makes the kernel fall back to the hash.
    public static func spreadReusePortGroup(_ fd: Int32, over count: Int) throws(Errno) {
        guard count > 0, count <= Int(UInt32.max) else { throw Errno.invalidArgument }
        if lookupd_attach_reuseport_random(fd, UInt32(count)) != 0 { throw Errno.current }
    }

    /// SO_RCVTIMEO and SO_SNDTIMEO, for a blocking socket that must not wait forever.
    public static func setTimeouts(_ fd: Int32, seconds: Int) {
        var t = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &t, socklen_t(MemoryLayout<timeval>.size))
    }
}

/// Process-wide settings the daemon makes once.
public enum ProcessSettings {
    /// prctl(PR_SET_NO_NEW_PRIVS): nothing this process runs can gain privileges through exec.
    @discardableResult
    public static func forbidNewPrivileges() -> Bool { lookupd_no_new_privileges() == 0 }
}
