import Addresses
import Configuration
import Loading
import Glibc
import SIP
import Screening

/// The request path of one worker without its sockets: bytes in, the same
/// `Responder` a worker uses, answer bytes out. It exists so that fuzzers and
/// regression tests drive exactly the code the daemon runs on received
/// bytes, TCP framing included, with nothing listening anywhere.
///
/// Threading: one thread at a time (it owns a parser and its buffers).
public final class RequestPathHarness {
    public let counters = WorkerCounters()
    private let set: ServingSet
    private var responder: Responder
    private var log: LogBuffer
    private let maxMessageSize: Int
    private let out: UnsafeMutableRawBufferPointer
    private let sink: Int32

    /// - Parameters:
    ///   - screening: the lists to screen with (the caller keeps the files alive).
    ///   - logToDevNull: format the call log as the daemon would, then throw
    ///     it away, so the log code runs too.
    public init(config: LookupdConfig, screening: ScreeningSet, toTagKey: UInt64 = 1, logToDevNull: Bool = true) {
        set = ServingSet(generation: 1, config: config, screening: screening, zone: (try? ZoneLoader.load(config.timeZone)) ?? .utc)
        maxMessageSize = config.maxMessageSize
        responder = Responder(parser: SIPParser(maxMessageSize: maxMessageSize, toTagKey: toTagKey), counters: counters)
        sink = logToDevNull ? open("/dev/null", O_WRONLY | O_CLOEXEC) : -1
        log = LogBuffer(level: logToDevNull ? config.logLevel : .error, fd: sink)
        // The size a worker gives each answer (Worker.outSlot).
        out = .allocate(byteCount: 2 * maxMessageSize + 4096, alignment: 64)
    }

    deinit {
        out.deallocate()
        if sink >= 0 { close(sink) }
    }

    /// One UDP datagram as a worker would see it (a datagram larger than
    /// `max-message-size` arrives cut to `max-message-size + 1` bytes).
    /// `body` gets the answer (empty: no answer); the bytes stay valid only
    /// during the call.
    public func datagram<R>(_ bytes: UnsafeRawBufferPointer, from ip: IPAddress, port: UInt16,
                            _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let input = bytes.count > maxMessageSize ? UnsafeRawBufferPointer(rebasing: bytes[0..<(maxMessageSize + 1)]) : bytes
        let n = responder.respond(to: input, transport: .udp, sourceIP: ip, sourcePort: port, set: set,
                                  into: out, log: &log)
        log.flush()
        return try body(UnsafeRawBufferPointer(rebasing: out[0..<n]))
    }

    /// What a TCP connection does with `bytes` received in one go: frames
    /// them as a worker does and answers each complete message, handing
    /// each answer to `answer` (valid only during the call). Returns the
    /// number of keep-alive pongs and whether the worker would close the
    /// connection (invalid framing or an oversized message).
    public func stream(_ bytes: UnsafeRawBufferPointer, from ip: IPAddress, port: UInt16,
                       answer: (UnsafeRawBufferPointer) -> Void) -> (pongs: Int, closed: Bool) {
        let framer = SIPStreamFramer(maxMessageSize: maxMessageSize)
        var pongs = 0
        // A worker's buffer holds at most max-message-size + 1 bytes: more
        // arrives only after a message has been consumed.
        var rest = bytes
        while !rest.isEmpty {
            let window = UnsafeRawBufferPointer(rebasing: rest.prefix(maxMessageSize + 1))
            switch framer.frame(window) {
            case .needMore:
                // With a full window the framer has decided; anything else
                // is a message still arriving.
                return (pongs, false)
            case .keepAlive(let consume, let pong):
                counters.add(.tcpKeepalives)
                if pong { pongs += 1 }
                rest = UnsafeRawBufferPointer(rebasing: rest[consume...])
            case .message(let length):
                let n = responder.respond(to: UnsafeRawBufferPointer(rebasing: window[0..<length]), transport: .tcp,
                                          sourceIP: ip, sourcePort: port, set: set, into: out, log: &log)
                log.flush()
                answer(UnsafeRawBufferPointer(rebasing: out[0..<n]))
                rest = UnsafeRawBufferPointer(rebasing: rest[length...])
            case .invalid(let error):
                counters.add(error == .tooLarge ? .tooLarge : .tcpClosedInvalid)
                return (pongs, true)
            }
        }
        return (pongs, false)
    }
}
