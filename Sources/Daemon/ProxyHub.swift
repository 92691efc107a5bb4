import Addresses
import Glibc
import SystemCalls

/// The peer of an accepted SIP TCP connection: where a response with this `received`/`rport`
/// must go.
///
/// Threading: a plain value; `Sendable`.
struct PeerKey: Hashable, Sendable {
    var ip: IPAddress
    var port: UInt16
}

/// Bytes for a TCP connection another worker holds.
///
/// Threading: any worker posts, the owning worker takes (a mutex and an eventfd).
final class ProxyInbox: Sendable {
    let fd: Int32
    private let items = Locked<[(PeerKey, [UInt8])]>([])

    init() throws(SystemError) {
        fd = (try? Poll.makeEventCounter()) ?? -1
        guard fd >= 0 else { throw SystemError("eventfd for the proxy inbox") }
    }

    deinit { close(fd) }

    func post(_ bytes: [UInt8], to key: PeerKey) {
        items.withLock { $0.append((key, bytes)) }
        Poll.post(fd)
    }

    func take() -> [(PeerKey, [UInt8])] {
        Poll.drain(fd)
        return items.withLock { list in
            let taken = list
            list.removeAll()
            return taken
        }
    }
}

/// Which worker holds the TCP connection to which peer. A response from the upstream reaches
/// whichever worker owns the upstream socket; the caller's connection may be another's.
/// One daemon per process, so one hub per process.
///
/// Threading: any worker (a mutex around the maps).
final class ProxyHub: Sendable {
    static let shared = ProxyHub()

    private struct State {
        var owners: [PeerKey: Int] = [:]
        var inboxes: [Int: ProxyInbox] = [:]
    }
    private let state = Locked(State())

    func join(worker: Int, inbox: ProxyInbox) { state.withLock { $0.inboxes[worker] = inbox } }
    func leave(worker: Int) {
        state.withLock { s in
            s.inboxes[worker] = nil
            s.owners = s.owners.filter { $0.value != worker }
        }
    }
    func connected(_ key: PeerKey, worker: Int) { state.withLock { $0.owners[key] = worker } }
    func disconnected(_ key: PeerKey, worker: Int) {
        state.withLock { s in if s.owners[key] == worker { s.owners[key] = nil } }
    }

    /// Hands `bytes` to the worker holding the connection to `key`; false when none does.
    func post(_ bytes: UnsafeRawBufferPointer, to key: PeerKey) -> Bool {
        guard let inbox = state.withLock({ s in s.owners[key].flatMap { s.inboxes[$0] } }) else { return false }
        inbox.post(Array(bytes), to: key)
        return true
    }
}
