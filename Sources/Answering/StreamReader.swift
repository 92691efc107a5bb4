import SIP

/// One connection's received bytes, message by message (RFC 3261 §18.3 framing, RFC 5626
/// keep-alive pings): the TCP half of answering, shared by the worker and the fuzz harness so
/// that both frame exactly alike.
///
/// Threading: a plain value; use it on the thread that owns the connection.
public struct StreamReader {
    public enum Event {
        /// A keep-alive ping: send `CRLF` back.
        case pong
        /// One complete message, to answer (valid during the call).
        case message(UnsafeRawBufferPointer)
    }

    let framer: SIPStreamFramer
    let counters: WorkerCounters

    public init(maxMessageSize: Int, counters: WorkerCounters) {
        framer = SIPStreamFramer(maxMessageSize: maxMessageSize)
        self.counters = counters
    }

    /// Hands every complete message (and ping) in `received` to `each`, in order. Returns the
    /// bytes consumed (the rest is a message still arriving) and whether the connection must
    /// be closed (framing it cannot recover from: no or a bad Content-Length, too large).
    public func read(_ received: UnsafeRawBufferPointer, _ each: (Event) -> Void) -> (consumed: Int, close: Bool) {
        var offset = 0
        while true {
            let rest = UnsafeRawBufferPointer(rebasing: received[offset...])
            switch framer.frame(rest) {
            case .needMore:
                return (offset, false)
            case .keepAlive(let consume, let pong):
                counters.add(.tcpKeepalives)
                if pong { each(.pong) }
                offset += consume
            case .message(let length):
                each(.message(UnsafeRawBufferPointer(rebasing: rest[0..<length])))
                offset += length
            case .invalid(let error):
                counters.add(error == .tooLarge ? .tooLarge : .tcpClosedInvalid)
                return (offset, true)
            }
        }
    }
}
