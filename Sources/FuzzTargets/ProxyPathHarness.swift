import Addresses
import Answering
import Configuration
import Loading
import SIP
import Screening

/// Proxy mode's decisions without sockets: a message from a caller or from the upstream in,
/// the `Answerer` a worker runs with its proxy context, the action out with its bytes. For the
/// proxy-path fuzz target and its regression tests, so they drive exactly the code a worker
/// runs on what it receives in `mode = proxy`.
///
/// Threading: one thread at a time (it owns a parser and its buffers).
public final class ProxyPathHarness {
    /// What the worker would do, with the bytes it would send.
    public enum Outcome {
        case nothing
        /// Answered by lookupd itself, to the source.
        case reply([UInt8])
        /// Forwarded to the upstream (a request).
        case upstream([UInt8])
        /// Relayed toward a caller (a response), to this address and port, over this transport.
        case downstream([UInt8], host: String, port: UInt16, transport: String)
        case probeAnswered
    }

    public let counters = WorkerCounters()
    private let set: ServingSet
    private var answerer: Answerer
    private var log: LogLines
    private let out: UnsafeMutableRawBufferPointer
    private let side: UnsafeMutableRawBufferPointer
    private let context: ProxyContext
    /// The clock stands still.
    private let now = WallTime(seconds: 1_700_000_000)
    /// The address requests leave from toward the upstream (its Via sent-by).
    public let via: SIPViaAddress
    public let upstream: (host: IPAddress, port: UInt16)

    /// - Parameters:
    ///   - upstreamAvailable: false answers 503 as a worker does while the upstream is down.
    public init(config: LookupdConfig, screening: ScreeningSet, branchKey: UInt64 = 7, upstreamAvailable: Bool = true) {
        set = ServingSet(generation: 1, config: config, screening: screening, zone: (try? ZoneLoader.load(config.timeZone)) ?? .utc)
        let size = 2 * config.maxMessageSize + 4096
        answerer = Answerer(parser: SIPParser(maxMessageSize: config.maxMessageSize, toTagKey: branchKey ^ 1), counters: counters)
        // Every line the configuration asks for is formatted, then thrown away.
        log = LogLines(level: config.logLevel, writesFile: true, keepsRecent: true)
        out = .allocate(byteCount: size, alignment: 64)
        side = .allocate(byteCount: size, alignment: 64)
        let upstream = config.proxy.upstream ?? UpstreamAddress(host: IPAddress("192.0.2.20")!, port: 5060, transport: .udp)
        self.upstream = (upstream.host, upstream.port)
        via = SIPViaAddress(transport: upstream.transport == .udp ? "UDP" : "TCP", host: "192.0.2.5", port: 5062)
        var own = config.listen.map { SIPViaAddress(transport: $0.transport == .udp ? "UDP" : "TCP", host: $0.host.description, port: $0.port) }
        own.append(via)
        context = ProxyContext(upstreamVia: via, ownAddresses: own, ownHosts: Array(Set(own.map(\.host))).sorted(), branchKey: branchKey,
                               upstreamHost: upstream.host, upstreamPort: upstream.port, upstreamAvailable: upstreamAvailable, callerFromKey: SIPCallerFromKey(0x1234_5678, 0x9abc_def0))
    }

    deinit {
        out.deallocate()
        side.deallocate()
    }

    /// One message received from `ip`:`port` over `transport`; `fromUpstream` when it came on
    /// the upstream's socket or connection.
    public func receive(_ bytes: UnsafeRawBufferPointer, transport: ListenAddress.Transport, from ip: IPAddress, port: UInt16,
                        fromUpstream: Bool) -> Outcome {
        let action = answerer.answer(bytes, from: MessageSource(ip: ip, port: port, transport: transport, fromUpstream: fromUpstream),
                                     set: set, proxy: context, now: now, into: out, fallback: side, log: &log)
        log.removeAll()
        switch action {
        case .none: return .nothing
        case .reply(let n): return .reply(Array(out[0..<n]))
        case .forward(let n, _): return .upstream(Array(out[0..<n]))
        case .relay(let n, let hop): return .downstream(Array(out[0..<n]), host: hop.host, port: hop.port, transport: hop.transport)
        case .probeAnswered: return .probeAnswered
        }
    }
}
