import Addresses
import Configuration
import Screening
import SIP

/// What one worker knows about its way to the upstream, for proxy decisions.
struct ProxyContext {
    /// The Via pushed on requests sent to the upstream (the address they leave from).
    var upstreamVia: SIPViaAddress
    /// Addresses a Route may name to mean lookupd (listen addresses and `upstreamVia`).
    var ownAddresses: [SIPViaAddress]
    var ownHosts: [String]
    /// The same in every worker (a CANCEL may reach another worker than its INVITE).
    var branchKey: UInt64
    /// Responses are taken from this address only (over UDP, from its port only): anyone else
    /// could otherwise have lookupd send a response of their making to a third party.
    var upstreamHost: IPAddress
    var upstreamPort: UInt16
    /// False while the upstream is known to be down: requests get 503 instead of silence.
    var upstreamAvailable: Bool
}

/// What the worker must do after `Responder.proxy`.
enum ProxyAction {
    case none
    /// Send the first `n` bytes of the buffer back to the source.
    case reply(Int)
    /// Send them to the upstream. `fallback` is a 503 for the source (in the side buffer),
    /// to be sent if the upstream turns out to be unreachable; 0 when there is none (ACK).
    case upstream(Int, fallback: Int)
    /// Send them to the next hop of a response.
    case downstream(Int, SIPNextHop)
    /// The upstream answered one of lookupd's own probes.
    case probeAnswered(Int)
}

extension Responder {
    /// Proxy mode (RFC 3261 §16.11): blocked callers are answered as in redirect mode; every
    /// other request is forwarded to the upstream, initial INVITEs with their label; responses
    /// from the upstream go back along the Via path. `fromUpstream`: received on the upstream
    /// socket or connection.
    mutating func proxy(_ bytes: UnsafeRawBufferPointer, transport: ListenAddress.Transport, sourceIP: IPAddress,
                        sourcePort: UInt16, fromUpstream: Bool, set: ServingSet, context: ProxyContext,
                        into out: UnsafeMutableRawBufferPointer, fallback: UnsafeMutableRawBufferPointer,
                        log: inout LogBuffer) -> ProxyAction {
        // Responses are judged by their source address and top Via (§16.11), whatever socket
        // they arrive on: an upstream may open a new connection to our sent-by (§18.2.2).
        if isResponse(bytes) {
            // Over TCP the upstream may open a new connection from any port to deliver a
            // response (§18.2.2); a datagram must come from the upstream's own port.
            guard fromUpstream || (sourceIP == context.upstreamHost && (transport == .tcp || sourcePort == context.upstreamPort)) else {
                counters.add(.proxyResponseNotOurs)
                return .none
            }
            switch parser.relayResponse(bytes, ours: [context.upstreamVia], branchKey: context.branchKey, into: out) {
            case .forward(let n, _, let hop):
                return .downstream(n, hop)
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
        let allowed = fromUpstream || set.isAllowed(sourceIP)
        if !allowed && set.config.refusalAction == .drop {
            counters.add(.aclDropped)
            return .none
        }
        let outcome = parser.parse(bytes)
        let source = SIPSourceAddress(ip: SocketAddress.text(sourceIP), port: sourcePort)
        let request = parser.request
        switch outcome {
        case .request:
            break
        case .response:
            return .none // handled above; a status line after leading CRLFs ends here
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
            return reply(request, SIPResponse(SIPRejection(malformation: malformation), source: source), into: out)
        }
        countMethod(request.method, transport)
        let isACK = request.method == .ack
        if !allowed {
            counters.add(.aclRejected)
            return isACK ? .none : reply(request, SIPResponse(statusCode: 403, reasonPhrase: "Forbidden", source: source), into: out)
        }
        if fromUpstream || (sourceIP == context.upstreamHost && sourcePort == context.upstreamPort) {
            // lookupd does not Record-Route, so nothing in a dialog comes back through it; a
            // request from the upstream (on its connection, or from its address and port to a
            // listen socket) would only be sent back to the upstream. Its address, not only its
            // host: a trunk on the PBX's machine is still a caller. One lookupd sent itself is
            // a loop.
            if request.hasLooped(key: context.branchKey, hosts: context.ownHosts) {
                counters.add(.proxyLoops)
                return isACK ? .none : reply(request, SIPResponse(statusCode: 482, reasonPhrase: "Loop Detected", source: source), into: out)
            }
            counters.add(.proxyRequestFromUpstream)
            return isACK ? .none : reply(request, SIPResponse(statusCode: 403, reasonPhrase: "Not Relaying", source: source), into: out)
        }
        if request.isACKForLocalAnswer {
            counters.add(.proxyLocalACKs)
            return .none
        }
        if isACK && request.maxForwards == 0 {
            counters.add(.proxyTooManyHops)
            return .none
        }
        if let rejection = proxyRejection(request) {
            if rejection.statusCode == 483 { counters.add(.proxyTooManyHops) }
            return reply(request, SIPResponse(rejection, source: source), into: out)
        }

        // OPTIONS to lookupd itself (no user part: dispatcher and qualify probes) is answered
        // here; OPTIONS to a user goes on to the PBX like any request.
        if request.method == .options, request.requestURI.user == nil {
            return reply(request, SIPResponse(statusCode: 200, reasonPhrase: "OK", source: source,
                                              headers: [SIPHeaderField("Allow", Responder.proxyAllow),
                                                        SIPHeaderField("Accept", "application/sdp")]), into: out)
        }
        if request.hasLooped(key: context.branchKey, hosts: context.ownHosts) {
            counters.add(.proxyLoops)
            return isACK ? .none : reply(request, SIPResponse(statusCode: 482, reasonPhrase: "Loop Detected", source: source), into: out)
        }

        var forwarding = SIPForwarding(via: context.upstreamVia, branchKey: context.branchKey, source: source,
                                       ownAddresses: context.ownAddresses,
                                       displayName: set.proxyDisplayName, labelHeaderName: set.config.labelHeader,
                                       labelInAssertedIdentity: set.config.proxy.labelInAssertedIdentity)
        forwarding.plainQuotedStrings = set.config.labelEscapes == .replace
        var decision: Decision? = nil
        if request.method == .invite && !request.toHasTag {
            let d = decide(request, set: set, sourceIP: sourceIP)
            decision = d
            if d.verdict == .blocked {
                var block = set.config.blockResponse
                if case .directory(let i)? = d.source, i < set.blockResponses.count { block = set.blockResponses[i] }
                var response = SIPResponse(statusCode: block.code, reasonPhrase: block.reasonPhrase, source: source,
                                           labelHeaderName: set.config.labelHeader,
                                           headers: block == .networkBlocked ? [SIPHeaderField("Reason", "SIP;cause=603;text=\"Network Blocked\"")] : [])
                response.plainQuotedStrings = set.config.labelEscapes == .replace
                let action: ProxyAction
                if let label = d.label {
                    // As in redirect mode: a UDP answer within the amplification bound.
                    let bound = transport == .udp ? Responder.amplificationLimit * bytes.count : nil
                    action = set.screening.withLabel(label) { labelBytes in
                        response.label = .buffer(labelBytes)
                        return reply(request, response, bound: bound, into: out)
                    }
                } else {
                    action = reply(request, response, into: out)
                }
                logCall(request, d, status: block.code, set: set, source: source, log: &log)
                return action
            }
        }
        // Responses are routed by the received/rport lookupd writes on the top Via: one it
        // cannot write them on (an empty parameter, another protocol or transport than the
        // request came over) is refused, never passed on for the upstream to answer to
        // wherever it points. (Answers lookupd gives itself go to the socket peer anyway.)
        if request.proxyViaProblem(transport: transport == .udp ? "UDP" : "TCP") != nil {
            counters.add(.proxyUnroutableVia)
            if let d = decision { logCall(request, d, status: 400, set: set, source: source, log: &log) }
            return isACK ? .none : reply(request, SIPResponse(statusCode: 400, reasonPhrase: "Bad Via", source: source), into: out)
        }
        guard context.upstreamAvailable else {
            counters.add(.proxyUpstreamUnavailable)
            if let d = decision { logCall(request, d, status: 503, set: set, source: source, log: &log) }
            return isACK ? .none : reply(request, Responder.unavailable(source), into: out)
        }
        let written: Int
        if let d = decision, let label = d.label {
            written = set.screening.withLabel(label) { bytes in
                forwarding.label = .buffer(bytes)
                return forward(request, forwarding, into: out)
            }
        } else {
            written = forward(request, forwarding, into: out)
        }
        guard written > 0 else { return .none }
        if let d = decision { logCall(request, d, status: 0, set: set, source: source, log: &log) }
        // The 503 to send if the upstream cannot be reached after all (a TCP connect refused).
        var fallbackLength = 0
        if !isACK, let result = try? request.writeResponse(Responder.unavailable(source), into: fallback) {
            fallbackLength = result.byteCount
        }
        return .upstream(written, fallback: fallbackLength)
    }

    static let proxyAllow = "INVITE, ACK, CANCEL, BYE, OPTIONS, PRACK, UPDATE, INFO, REFER, MESSAGE, NOTIFY, SUBSCRIBE"

    static func unavailable(_ source: SIPSourceAddress) -> SIPResponse {
        SIPResponse(statusCode: 503, reasonPhrase: "Service Unavailable", source: source)
    }

    /// The proxy's checks (§16.3): version, CSeq method, URI scheme, Max-Forwards (483) and
    /// Proxy-Require (420: lookupd supports no extension that needs a proxy's help). Unlike a
    /// UAS, a proxy leaves Require to the endpoints and forwards every known method.
    private func proxyRejection(_ request: SIPRequest) -> SIPRejection? {
        // An ACK is never answered (§17); the caller drops one that has run out of hops.
        guard request.method != .ack else { return nil }
        if !request.isSIP2_0 { return SIPRejection(statusCode: 505, reasonPhrase: "Version Not Supported") }
        if request.method == .other {
            return SIPRejection(statusCode: 501, reasonPhrase: "Not Implemented", headers: [SIPHeaderField("Allow", Responder.proxyAllow)])
        }
        if request.cseqMethod != request.methodText { return SIPRejection(statusCode: 400, reasonPhrase: "CSeq Method Mismatch") }
        if request.requestURI.scheme == .other { return SIPRejection(statusCode: 416, reasonPhrase: "Unsupported URI Scheme") }
        if request.maxForwards == 0 { return SIPRejection(statusCode: 483, reasonPhrase: "Too Many Hops") }
        var unsupported: [String] = []
        for tag in request.proxyRequireTags where !unsupported.contains(tag.string) { unsupported.append(tag.string) }
        if !unsupported.isEmpty, request.method != .cancel {
            return SIPRejection(statusCode: 420, reasonPhrase: "Bad Extension",
                                headers: [SIPHeaderField("Unsupported", unsupported.joined(separator: ", "))])
        }
        return nil
    }

    /// The verdict for an initial INVITE, counted as in redirect mode.
    private func decide(_ request: SIPRequest, set: ServingSet, sourceIP: IPAddress) -> Decision {
        decideAndCount(request, caller: callerIdentity(request, set: set, sourceIP: sourceIP), set: set)
    }

    private func reply(_ request: SIPRequest, _ response: SIPResponse, bound: Int? = nil, into out: UnsafeMutableRawBufferPointer) -> ProxyAction {
        let n = write(request, response, bound: bound, into: out)
        return n > 0 ? .reply(n) : .none
    }

    private func forward(_ request: SIPRequest, _ forwarding: SIPForwarding, into out: UnsafeMutableRawBufferPointer) -> Int {
        do {
            let result = try request.writeForwarded(forwarding, into: out)
            if result.labelRefusal != nil { counters.add(.labelsRefused) }
            return result.byteCount
        } catch {
            counters.add(.responseTooLarge)
            return 0
        }
    }

    private func isResponse(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        while i < bytes.count, bytes[i] == 0x0D || bytes[i] == 0x0A { i += 1 }
        guard bytes.count - i >= 4 else { return false }
        return bytes[i] == UInt8(ascii: "S") && bytes[i + 1] == UInt8(ascii: "I") && bytes[i + 2] == UInt8(ascii: "P")
            && bytes[i + 3] == UInt8(ascii: "/")
    }
}

extension ServingSet {
    /// `label-format` as the SIP module's display-name parts.
    var proxyDisplayName: [SIPDisplayNamePart] {
        config.proxy.labelFormat.parts.map {
            switch $0 {
            case .text(let t): return .text(t)
            case .label: return .label
            case .name: return .originalName
            }
        }
    }
}
