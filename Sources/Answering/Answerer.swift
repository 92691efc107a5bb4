import Addresses
import Configuration
import Screening
import SIP

/// Where a message came from, as the socket layer saw it: never anything the message says.
///
/// Threading: a plain value; `Sendable`.
public struct MessageSource: Sendable, Hashable {
    public var ip: IPAddress
    public var port: UInt16
    public var transport: ListenAddress.Transport
    /// Proxy mode: received on the upstream's own socket or connection.
    public var fromUpstream: Bool

    public init(ip: IPAddress, port: UInt16, transport: ListenAddress.Transport, fromUpstream: Bool = false) {
        self.ip = ip
        self.port = port
        self.transport = transport
        self.fromUpstream = fromUpstream
    }
}

/// What the I/O side must do with a message once `Answerer.answer` has looked at it. The bytes
/// are in the buffers given to `answer`, valid until its next call.
///
/// Threading: a plain value; `Sendable`.
public enum Action: Sendable, Hashable {
    /// Nothing to send (dropped, ignored or absorbed; counted).
    case none
    /// Send the first `n` bytes of `out` back to the source.
    case reply(Int)
    /// Proxy mode: send the first `n` bytes of `out` to the upstream. `fallback` bytes of the
    /// fallback buffer are a 503 for the source, to send if the upstream turns out to be
    /// unreachable (0 when there is none: an ACK).
    case forward(Int, fallback: Int)
    /// Proxy mode: a response from the upstream; send the first `n` bytes of `out` to `hop`.
    case relay(Int, SIPNextHop)
    /// Proxy mode: the upstream answered one of lookupd's own probes with this status.
    case probeAnswered(Int)
}

/// Answers SIP messages: request bytes and a serving set in, an `Action` out. The whole of
/// lookupd's answering policy for both modes — which sources are answered, which bytes are an
/// ACK, the protocol checks, who the caller is, the status each verdict gets, what a forwarded
/// request carries — with no socket, no thread and no clock of its own (`now` is given).
///
/// Redirect mode (RFC 3261 §8.2.7, §8.3) answers every request itself. Proxy mode (§16.11,
/// `proxy` given) answers blocked callers and the requests it must refuse, forwards the rest to
/// the upstream with the label, and relays the upstream's responses back along the Via path.
/// docs/SIP.md has the tables; AnsweringTests checks every row of them.
///
/// Threading: one per worker thread (it owns the worker's parser and scratch); not `Sendable`.
public struct Answerer {
    public let parser: SIPParser
    public let counters: WorkerCounters
    public let verdictSources: VerdictSourceCounters
    /// The text of the last source address: PBXs send from one or a few addresses, so
    /// formatting it once saves an allocation per request.
    private var lastSourceIP = IPAddress(bytes: (0, 0))
    private var lastSourceText = "::"
    /// Scratch for the decision-log line, reused call after call.
    var line = DecisionLine()

    public init(parser: SIPParser, counters: WorkerCounters = WorkerCounters(),
                verdictSources: VerdictSourceCounters = VerdictSourceCounters()) {
        self.parser = parser
        self.counters = counters
        self.verdictSources = verdictSources
    }

    /// The request of the last `answer` (valid until the next one).
    public var request: SIPRequest { parser.request }

    /// Looks at one message (a datagram, or one framed TCP message) and writes what it calls for.
    ///
    /// - Parameters:
    ///   - proxy: this worker's way to the upstream; nil in redirect mode.
    ///   - now: the wall clock, for `active=` windows and the decision log.
    ///   - out: room for the answer (2 × max-message-size + 4096 bytes covers any).
    ///   - fallback: proxy mode, the 503 kept for a forwarded request.
    public mutating func answer(_ bytes: UnsafeRawBufferPointer, from source: MessageSource, set: ServingSet,
                                proxy: ProxyContext?, now: WallTime, into out: UnsafeMutableRawBufferPointer,
                                fallback: UnsafeMutableRawBufferPointer, log: inout LogLines) -> Action {
        let policy = set.policy
        if let proxy, Answerer.isResponse(bytes) { return relay(bytes, from: source, proxy: proxy, into: out) }
        let allowed = source.fromUpstream || policy.allows(source.ip)
        if !allowed && policy.dropsRefused {
            counters.add(.aclDropped)
            return .none
        }
        // A stateless UAS ignores ACK (§8.2.7) whatever it holds, so it is not worth a parse:
        // half of a PBX's messages to a redirect server are ACKs for the final answers it got.
        // A proxy forwards them, so it reads them.
        if proxy == nil, Answerer.isACK(bytes) {
            counters.add(source.transport == .udp ? .udpAck : .tcpAck)
            if !allowed { counters.add(.aclDropped) }
            return .none
        }
        let outcome = parser.parse(bytes)
        let from = sourceAddress(source)
        let request = parser.request
        switch outcome {
        case .request:
            break
        case .response:
            // Redirect mode only (a proxy relays responses above): a redirect server never expects one.
            counters.add(.strayResponses)
            return .none
        case .keepAlive:
            return .none
        case .tooLarge:
            counters.add(.tooLarge)
            return .none
        case .garbage:
            counters.add(.malformedDropped)
            return .none
        case .malformed(let malformation, let canRespond):
            guard canRespond, allowed else {
                counters.add(allowed ? .malformedDropped : .aclDropped)
                return .none
            }
            counters.add(.malformedAnswered)
            if log.enabled(.debug) {
                log.begin(.debug)
                log.text("malformed")
                log.field("reason", malformation.description)
                log.field("from", "\(from.ip):\(from.port)")
                log.end()
            }
            return reply(request, SIPResponse(SIPRejection(malformation: malformation), source: from), into: out)
        }

        countMethod(request.method, source.transport)
        let isACK = request.method == .ack
        if !allowed {
            counters.add(.aclRejected)
            return isACK ? .none : reply(request, SIPResponse(statusCode: 403, reasonPhrase: "Forbidden", source: from), into: out)
        }
        if let proxy, let refusal = proxyRefusal(request, from: source, proxy: proxy) {
            return refusal == .absorb ? .none : reply(request, SIPResponse(statusCode: refusal.statusCode, reasonPhrase: refusal.reasonPhrase, source: from), into: out)
        }
        if let rejection = request.protocolRejection(policy: proxy == nil ? .standard : .proxy) {
            if proxy != nil && rejection.statusCode == 483 { counters.add(.proxyTooManyHops) }
            return reply(request, SIPResponse(rejection, source: from), into: out)
        }
        // OPTIONS to lookupd itself (dispatcher and qualify probes); a proxy forwards OPTIONS
        // to a user like any request.
        if request.method == .options, proxy == nil || request.requestURI.user == nil {
            return reply(request, answer: proxy == nil ? policy.redirectOptions : policy.proxyOptions, from: from, into: out)
        }
        if let proxy, request.hasLooped(key: proxy.branchKey, hosts: proxy.ownHosts) {
            counters.add(.proxyLoops)
            return isACK ? .none : reply(request, SIPResponse(statusCode: 482, reasonPhrase: "Loop Detected", source: from), into: out)
        }

        guard request.method == .invite && !request.toHasTag else {
            guard let proxy else {
                switch request.method {
                case .ack:
                    // §8.2.7: a stateless UAS ignores ACK.
                    return .none
                case .cancel:
                    // §8.2.7: its INVITE already got a final answer, there is nothing to cancel.
                    counters.add(.cancelIgnored)
                    return .none
                default:
                    // BYE and re-INVITEs: a redirect server holds no dialogs.
                    return reply(request, SIPResponse(statusCode: 481, reasonPhrase: "Call/Transaction Does Not Exist", source: from), into: out)
                }
            }
            // No decision, so no label to vanish: always an action.
            return forward(request, decision: nil, from: source, address: from, set: set, proxy: proxy, now: now,
                           into: out, fallback: fallback, log: &log) ?? .none
        }
        // Back after lookupd's own 302 (a phone that followed it to a Request-URI naming
        // lookupd, a UA with lookupd as its outbound proxy): screening it again would answer
        // the same 302, round after round, each one counted and logged as a new call.
        if request.returnsFromRedirect {
            counters.add(.redirectLoops)
            if log.enabled(.debug) {
                log.begin(.debug)
                log.text("redirect-loop")
                log.field("call-id", request.callID.bytes)
                log.field("from", "\(from.ip):\(from.port)")
                log.end()
            }
            return reply(request, SIPResponse(statusCode: 482, reasonPhrase: "Loop Detected", source: from), into: out)
        }
        // An initial INVITE: screen the caller.
        let identity = callerIdentity(request, policy: policy, source: source.ip)
        var decision = screen(request, caller: identity, set: set, now: now)
        // A directory served from disk can lose the page of a label between the lookup that
        // verified it and the copy the answer is written from (truncated in place): the
        // answer would then be the file's verdict without its label, which the file never
        // gave. Decided again, that file's lookups now fail and the next source answers.
        for _ in 0..<set.screening.directories.count {
            if let action = answerScreened(request, decision: decision, identity: identity, bytes: bytes, from: source,
                                           address: from, set: set, proxy: proxy, now: now, into: out, fallback: fallback,
                                           log: &log) {
                count(decision)
                return action
            }
            decision = screen(request, caller: identity, set: set, now: now)
        }
        count(decision)
        return answerScreened(request, decision: decision, identity: identity, bytes: bytes, from: source, address: from,
                              set: set, proxy: proxy, now: now, into: out, fallback: fallback, log: &log,
                              vanishedLabel: .empty) ?? .none
    }

    /// What to do with a label that vanished (see `answer`): ask for the decision again, or
    /// (once every directory has had its chance) write the answer without it.
    enum VanishedLabel { case decideAgain, empty }

    /// `body` with the label's bytes; nil (body not called) when the label vanished and
    /// `vanished` says to decide again.
    private static func withLabel<R>(_ label: LabelReference, of set: ServingSet, _ vanished: VanishedLabel,
                                     _ body: (UnsafeRawBufferPointer) -> R) -> R? {
        switch vanished {
        case .decideAgain: return set.screening.withIntactLabel(label, body)
        case .empty: return set.screening.withLabel(label, body)
        }
    }

    /// The answer to a screened initial INVITE, nil when its label vanished and
    /// `vanishedLabel` says to decide again (nothing was written, counted or logged).
    private mutating func answerScreened(_ request: SIPRequest, decision: Decision, identity: SIPIdentityURI,
                                         bytes: UnsafeRawBufferPointer, from source: MessageSource, address from: SIPSourceAddress,
                                         set: ServingSet, proxy: ProxyContext?, now: WallTime,
                                         into out: UnsafeMutableRawBufferPointer, fallback: UnsafeMutableRawBufferPointer,
                                         log: inout LogLines, vanishedLabel: VanishedLabel = .decideAgain) -> Action? {
        let policy = set.policy
        let bound = source.transport == .udp ? Answerer.amplificationLimit * bytes.count : nil
        if let proxy, decision.verdict == .blocked, let uri = policy.answer(to: decision).forwardURI {
            // block-treatment = redirect to the upstream itself: the PBX plays the announcement.
            return forward(request, decision: decision, requestURI: uri, from: source, address: from, set: set, proxy: proxy,
                           now: now, into: out, fallback: fallback, log: &log, vanishedLabel: vanishedLabel)
        }
        guard let proxy, decision.verdict != .blocked else {
            // Answered here: every verdict in redirect mode, a blocked caller in proxy mode too.
            let local = policy.answer(to: decision)
            let id = local.reasonAroundID != nil ? DecisionID.make(request, source: from) : nil
            var response = SIPResponse(statusCode: local.statusCode, reasonPhrase: local.reasonPhrase, source: from,
                                       contact: local.contact, identity: local.assertsIdentity ? identity : nil,
                                       labelHeaderName: policy.labelHeader, headers: local.headers(id: id))
            response.plainQuotedStrings = policy.plainQuotedStrings
            response.marksContact = local.contact != nil
            let action: Action
            // A rejection goes back toward the caller (a PBX relays it, a trunk maps it to a
            // release cause): a scammer would learn how he is labelled. Only a labelled 302,
            // which the PBX acts on, carries the label unless label-to-caller says otherwise;
            // with redirect-target the 302 goes to the caller's UA, and is a rejection's like.
            if let label = decision.label,
               local.isRejection ? policy.labelToCaller : local.isBlockRedirect ? policy.labelsBlockRedirects : policy.labelsRedirects {
                // The closure takes the counters, not the answerer: capturing `self` would copy it.
                let counters = self.counters
                guard let written = Answerer.withLabel(label, of: set, vanishedLabel, { labelBytes in
                    response.label = .buffer(labelBytes)
                    return Answerer.reply(request, &response, bound: bound, counters: counters, into: out)
                }) else { return nil }
                action = written
            } else {
                action = reply(request, &response, into: out)
            }
            logCall(request, decision, status: local.statusCode, set: set, source: from, now: now, id: id,
                    treatment: local.treatment, log: &log)
            return action
        }
        return forward(request, decision: decision, from: source, address: from, set: set, proxy: proxy, now: now,
                       into: out, fallback: fallback, log: &log, vanishedLabel: vanishedLabel)
    }

    // MARK: - Proxy mode

    /// What a proxy refuses before the protocol checks.
    struct Refusal: Equatable {
        let statusCode: Int
        let reasonPhrase: String
        /// Absorbed without an answer (ACKs are never answered).
        static let absorb = Refusal(statusCode: 0, reasonPhrase: "")
    }

    private func proxyRefusal(_ request: SIPRequest, from source: MessageSource, proxy: ProxyContext) -> Refusal? {
        let isACK = request.method == .ack
        if source.fromUpstream || (source.ip == proxy.upstreamHost && source.port == proxy.upstreamPort) {
            // lookupd does not Record-Route, so nothing in a dialog comes back through it; a
            // request from the upstream (on its connection, or from its address and port to a
            // listen socket) would only be sent back to the upstream. Its address, not only its
            // host: a trunk on the PBX's machine is still a caller. One lookupd sent itself is
            // a loop.
            if request.hasLooped(key: proxy.branchKey, hosts: proxy.ownHosts) {
                counters.add(.proxyLoops)
                return isACK ? .absorb : Refusal(statusCode: 482, reasonPhrase: "Loop Detected")
            }
            counters.add(.proxyRequestFromUpstream)
            return isACK ? .absorb : Refusal(statusCode: 403, reasonPhrase: "Not Relaying")
        }
        if request.isACKForLocalAnswer {
            // The ACK for an answer lookupd gave itself: the PBX never saw that INVITE.
            counters.add(.proxyLocalACKs)
            return .absorb
        }
        if isACK && request.maxForwards == 0 {
            // An ACK is never answered (§17); one that has run out of hops goes no further.
            counters.add(.proxyTooManyHops)
            return .absorb
        }
        return nil
    }

    /// Forwards a request to the upstream (§16.6), an initial INVITE with its caller's label.
    private mutating func forward(_ request: SIPRequest, decision: Decision?, requestURI: String? = nil, from source: MessageSource,
                                  address: SIPSourceAddress, set: ServingSet, proxy: ProxyContext, now: WallTime,
                                  into out: UnsafeMutableRawBufferPointer, fallback: UnsafeMutableRawBufferPointer,
                                  log: inout LogLines, vanishedLabel: VanishedLabel = .empty) -> Action? {
        let isACK = request.method == .ack
        // Responses are routed by the received/rport lookupd writes on the top Via: one it
        // cannot write them on (an empty parameter, another protocol or transport than the
        // request came over) is refused, never passed on for the upstream to answer to
        // wherever it points. (Answers lookupd gives itself go to the socket peer anyway.)
        if request.proxyViaProblem(transport: source.transport == .udp ? "UDP" : "TCP") != nil {
            counters.add(.proxyUnroutableVia)
            if let decision { logCall(request, decision, status: 400, set: set, source: address, now: now, log: &log) }
            return isACK ? .none : reply(request, SIPResponse(statusCode: 400, reasonPhrase: "Bad Via", source: address), into: out)
        }
        guard proxy.upstreamAvailable else {
            counters.add(.proxyUpstreamUnavailable)
            if let decision { logCall(request, decision, status: 503, set: set, source: address, now: now, log: &log) }
            return isACK ? .none : reply(request, Answerer.unavailable(address), into: out)
        }
        let policy = set.policy
        var forwarding = SIPForwarding(via: proxy.upstreamVia, branchKey: proxy.branchKey, source: address,
                                       ownAddresses: proxy.ownAddresses, displayName: policy.displayName,
                                       labelHeaderName: policy.labelHeader, labelInAssertedIdentity: policy.labelInAssertedIdentity)
        forwarding.plainQuotedStrings = policy.plainQuotedStrings
        // The label is for the PBX: the caller gets his own From back in every response.
        if !policy.labelToCaller { forwarding.callerFromKey = proxy.callerFromKey }
        forwarding.requestURI = requestURI
        // label-format's {attribution}: copied, since only labelled calls of configurations
        // that ask for it pay for it.
        if policy.displayNameHasAttribution, let d = decision, d.label != nil, let number = d.number,
           let attribution = set.screening.attribution {
            attribution.withDescription(number) { forwarding.attribution = .bytes(Array($0)) }
        }
        let written: Int
        if let label = decision?.label {
            let counters = self.counters
            guard let n = Answerer.withLabel(label, of: set, vanishedLabel, { bytes in
                forwarding.label = .buffer(bytes)
                return Answerer.write(request, forwarding, counters: counters, into: out)
            }) else { return nil }
            written = n
        } else {
            written = Answerer.write(request, forwarding, counters: counters, into: out)
        }
        guard written > 0 else { return Action.none }
        if let decision {
            logCall(request, decision, status: 0, set: set, source: address, now: now,
                    treatment: requestURI != nil ? "redirect" : nil, log: &log)
        }
        // The 503 to send if the upstream cannot be reached after all (a TCP connect refused).
        var fallbackLength = 0
        if !isACK, let result = try? request.writeResponse(Answerer.unavailable(address), into: fallback) {
            fallbackLength = result.byteCount
        }
        return .forward(written, fallback: fallbackLength)
    }

    /// A response (§16.11): taken only from the upstream (over UDP from its own port; over TCP
    /// it may open a new connection from any port, §18.2.2) and only with lookupd's Via on top.
    private func relay(_ bytes: UnsafeRawBufferPointer, from source: MessageSource, proxy: ProxyContext,
                       into out: UnsafeMutableRawBufferPointer) -> Action {
        guard source.fromUpstream || (source.ip == proxy.upstreamHost && (source.transport == .tcp || source.port == proxy.upstreamPort)) else {
            counters.add(.proxyResponseNotOurs)
            return .none
        }
        switch parser.relayResponse(bytes, ours: [proxy.upstreamVia], branchKey: proxy.branchKey,
                                    callerFromKey: proxy.callerFromKey, into: out) {
        case .forward(let n, _, let hop):
            return .relay(n, hop)
        case .ownRequest(let code):
            return .probeAnswered(code)
        case .notOurs:
            counters.add(.proxyResponseNotOurs)
        case .noNextVia:
            counters.add(.proxyResponseUnroutable)
        case .malformed:
            counters.add(.proxyResponseMalformed)
        }
        return .none
    }

    static func unavailable(_ source: SIPSourceAddress) -> SIPResponse {
        SIPResponse(statusCode: 503, reasonPhrase: "Service Unavailable", source: source)
    }

    // MARK: - Bytes

    /// `ACK ` at the very start: the only request a redirect server ignores unread.
    @inline(__always)
    static func isACK(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= 4 && bytes[0] == UInt8(ascii: "A") && bytes[1] == UInt8(ascii: "C") && bytes[2] == UInt8(ascii: "K")
            && bytes[3] == UInt8(ascii: " ")
    }

    /// A status line (`SIP/`) after any CR/LF: a response, for the proxy to relay.
    static func isResponse(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        while i < bytes.count, bytes[i] == 0x0D || bytes[i] == 0x0A { i += 1 }
        guard bytes.count - i >= 4 else { return false }
        return bytes[i] == UInt8(ascii: "S") && bytes[i + 1] == UInt8(ascii: "I") && bytes[i + 2] == UInt8(ascii: "P")
            && bytes[i + 3] == UInt8(ascii: "/")
    }

    private mutating func sourceAddress(_ source: MessageSource) -> SIPSourceAddress {
        if source.ip != lastSourceIP {
            lastSourceIP = source.ip
            lastSourceText = source.ip.description
        }
        return SIPSourceAddress(ip: lastSourceText, port: source.port)
    }

    // MARK: - Writing

    private func reply(_ request: SIPRequest, answer: LocalAnswer, from: SIPSourceAddress,
                       into out: UnsafeMutableRawBufferPointer) -> Action {
        reply(request, SIPResponse(statusCode: answer.statusCode, reasonPhrase: answer.reasonPhrase, source: from,
                                   contact: answer.contact, headers: answer.headers), into: out)
    }

    /// A UDP answer is at most this many times the size of the request it answers: with a
    /// source address anyone can forge, a small INVITE for a labelled number must not buy a
    /// large datagram sent to a third party (measured in docs/TESTING.md). Past it the label
    /// is left out of P-Asserted-Identity, then out of the answer (counted as trimmed).
    static let amplificationLimit = 3

    private func reply(_ request: SIPRequest, _ response: inout SIPResponse, into out: UnsafeMutableRawBufferPointer) -> Action {
        Answerer.reply(request, &response, bound: nil, counters: counters, into: out)
    }

    private func reply(_ request: SIPRequest, _ response: SIPResponse, into out: UnsafeMutableRawBufferPointer) -> Action {
        Answerer.reply(request, response, bound: nil, counters: counters, into: out)
    }

    /// For a response held in a variable (captured by the label closure): passed in place,
    /// which spares a copy of the whole response per call.
    private static func reply(_ request: SIPRequest, _ response: inout SIPResponse, bound: Int?, counters: WorkerCounters,
                              into out: UnsafeMutableRawBufferPointer) -> Action {
        reply(request, response, bound: bound, counters: counters, into: out)
    }

    private static func reply(_ request: SIPRequest, _ response: SIPResponse, bound: Int?, counters: WorkerCounters,
                              into out: UnsafeMutableRawBufferPointer) -> Action {
        do {
            var result = try request.writeResponse(response, into: out)
            if let bound, result.byteCount > bound, response.label != nil {
                // Smaller first without the label in P-Asserted-Identity, then without it at all.
                var smaller = response
                smaller.labelInIdentity = false
                result = try request.writeResponse(smaller, into: out)
                if result.byteCount > bound {
                    smaller.label = nil
                    result = try request.writeResponse(smaller, into: out)
                }
                counters.add(.responsesTrimmed)
            }
            if result.labelRefusal != nil { counters.add(.labelsRefused) }
            counters.add(Counter.response(response.statusCode))
            return .reply(result.byteCount)
        } catch {
            counters.add(.responseTooLarge)
            return .none
        }
    }

    private static func write(_ request: SIPRequest, _ forwarding: SIPForwarding, counters: WorkerCounters,
                              into out: UnsafeMutableRawBufferPointer) -> Int {
        do {
            let result = try request.writeForwarded(forwarding, into: out)
            if result.labelRefusal != nil { counters.add(.labelsRefused) }
            return result.byteCount
        } catch {
            counters.add(.responseTooLarge)
            return 0
        }
    }

    // MARK: - Counting

    func countMethod(_ method: SIPMethod, _ transport: ListenAddress.Transport) {
        let base = transport == .udp ? 0 : Counter.methodOffset
        let offset: Int
        switch method {
        case .invite: offset = 0
        case .ack: offset = 1
        case .cancel: offset = 2
        case .bye: offset = 3
        case .options: offset = 4
        case .register: offset = 5
        default: offset = 6
        }
        counters.add(Counter(rawValue: Counter.udpInvite.rawValue + base + offset)!)
    }
}
