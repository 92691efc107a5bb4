import Addresses
import Answering
import Configuration
import Loading
import Screening
import SIP

/// The request path of one worker without its sockets: bytes in, the `Answerer` and the
/// `StreamReader` a worker uses, answer bytes out. Fuzzers and regression tests drive exactly
/// the code the daemon runs on received bytes, TCP framing included, with nothing listening
/// anywhere; the socket side is only imitated (a datagram cut at max-message-size + 1, a
/// connection buffer of max-message-size + 1 bytes filled as reads would fill it).
///
/// Threading: one thread at a time (it owns a parser and its buffers).
public final class RequestPathHarness {
    public let counters = WorkerCounters()
    private let set: ServingSet
    private var answerer: Answerer
    private let reader: StreamReader
    private var log: LogLines
    private let maxMessageSize: Int
    private let out: UnsafeMutableRawBufferPointer
    private let fallback: UnsafeMutableRawBufferPointer
    private let warmup = CallerWarmup(messages: 1)
    /// The clock stands still: a repeated datagram must get the same answer.
    private let now = WallTime(seconds: 1_700_000_000)

    /// - Parameters:
    ///   - screening: the lists to screen with (the caller keeps the files alive).
    ///   - logsEverything: format every log line the configuration asks for, file lines too,
    ///     so the log code runs as well (the lines are thrown away).
    public init(config: LookupdConfig, screening: ScreeningSet, toTagKey: UInt64 = 1, logsEverything: Bool = true) {
        set = ServingSet(generation: 1, config: config, screening: screening, zone: (try? ZoneLoader.load(config.timeZone)) ?? .utc)
        maxMessageSize = config.maxMessageSize
        answerer = Answerer(parser: SIPParser(maxMessageSize: maxMessageSize, toTagKey: toTagKey), counters: counters)
        reader = StreamReader(maxMessageSize: maxMessageSize, counters: counters)
        log = LogLines(level: logsEverything ? config.logLevel : .error, writesFile: logsEverything, keepsRecent: logsEverything)
        // The size a worker gives each answer (Worker.outSlot).
        out = .allocate(byteCount: 2 * maxMessageSize + 4096, alignment: 64)
        fallback = .allocate(byteCount: 2 * maxMessageSize + 4096, alignment: 64)
    }

    deinit {
        out.deallocate()
        fallback.deallocate()
    }

    private func answer(_ bytes: UnsafeRawBufferPointer, _ source: MessageSource) -> Int {
        let action = answerer.answer(bytes, from: source, set: set, proxy: nil, now: now, into: out, fallback: fallback, log: &log)
        log.removeAll()
        if case .reply(let n) = action { return n }
        return 0
    }

    /// One UDP datagram as a worker would see it (a datagram larger than `max-message-size`
    /// arrives cut to `max-message-size + 1` bytes). `body` gets the answer (empty: no
    /// answer); the bytes stay valid only during the call.
    public func datagram<R>(_ bytes: UnsafeRawBufferPointer, from ip: IPAddress, port: UInt16,
                            _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let input = bytes.count > maxMessageSize ? UnsafeRawBufferPointer(rebasing: bytes[0..<(maxMessageSize + 1)]) : bytes
        // The worker's warm-up before a batch, here for a batch of this one datagram, so the
        // fuzzers read hostile bytes through the caller guess too.
        warmup.add(input)
        warmup.warm(set.screening, everyDirectory: true)
        let n = answer(input, MessageSource(ip: ip, port: port, transport: .udp))
        return try body(UnsafeRawBufferPointer(rebasing: out[0..<n]))
    }

    /// What a TCP connection does with `bytes` arriving on it: read into a buffer of the
    /// worker's size, framed and answered message by message as a worker does, each answer
    /// handed to `answer` (valid only during the call). Returns the number of keep-alive pongs
    /// and whether the worker would close the connection (invalid framing, an oversized message).
    public func stream(_ bytes: UnsafeRawBufferPointer, from ip: IPAddress, port: UInt16,
                       answer deliver: (UnsafeRawBufferPointer) -> Void) -> (pongs: Int, closed: Bool) {
        let source = MessageSource(ip: ip, port: port, transport: .tcp)
        let capacity = maxMessageSize + 1
        var buffer: [UInt8] = []
        buffer.reserveCapacity(capacity)
        var rest = bytes[...]
        var pongs = 0
        while true {
            // A read takes what fits in the connection's buffer.
            let take = min(capacity - buffer.count, rest.count)
            buffer.append(contentsOf: rest.prefix(take))
            rest = rest.dropFirst(take)
            let (consumed, close) = buffer.withUnsafeBytes { received in
                reader.read(received) { event in
                    switch event {
                    case .pong: pongs += 1
                    case .message(let message):
                        let n = answer(message, source)
                        if n > 0 { deliver(UnsafeRawBufferPointer(rebasing: out[0..<n])) }
                    }
                }
            }
            if close { return (pongs, true) }
            buffer.removeFirst(consumed)
            // Nothing more will come: what is left is a message still arriving.
            if rest.isEmpty || (consumed == 0 && take == 0) { return (pongs, false) }
        }
    }
}
