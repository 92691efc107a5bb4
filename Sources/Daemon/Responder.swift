import Addresses
import Configuration
import Directory
import Screening
import SIP

/// Turns a parsed request into the answer a stateless redirect server gives
/// (RFC 3261 §8.2.7, §8.3): the verdict for an initial INVITE, the protocol
/// answers for everything else. The glue between SIP and Screening.
///
/// Threading: one per worker (it holds the worker's parser and buffers).
struct Responder {
    let parser: SIPParser
    let counters: WorkerCounters
    let policy = SIPProtocolPolicy.standard
    private let optionsHeaders: [SIPHeaderField]
    private let networkBlockedHeaders = [SIPHeaderField("Reason", "SIP;cause=603;text=\"Network Blocked\"")]
    /// The text of the last source address: PBXs send from one or a few
    /// addresses, so formatting it once saves an allocation per request.
    private var lastSourceIP = IPAddress(bytes: (0, 0))
    private var lastSourceText = "::"
    let verdictSources: VerdictSourceCounters
    /// Scratch for the decision-log line, reused call after call.
    private var line = DecisionLine()

    init(parser: SIPParser, counters: WorkerCounters, verdictSources: VerdictSourceCounters = VerdictSourceCounters()) {
        self.parser = parser
        self.counters = counters
        self.verdictSources = verdictSources
        self.optionsHeaders = [
            SIPHeaderField("Allow", SIPProtocolPolicy.standard.allowHeaderValue),
            SIPHeaderField("Accept", "application/sdp"),
        ]
    }

    /// What happened to one message, for the call log.
    struct Outcome {
        var decision: Decision?
        var status: Int = 0
    }

    /// A UDP answer is at most this many times the size of the request it answers: with a
    /// source address anyone can forge, a small INVITE for a labelled number must not buy a
    /// large datagram sent to a third party (measured in docs/TESTING.md). Past it the label
    /// is left out of P-Asserted-Identity, then out of the answer (counted as trimmed).
    static let amplificationLimit = 3

    /// Parses `bytes` and writes the answer into `out`. Returns the answer's
    /// length (0: no answer) and, for screened INVITEs, the decision.
    mutating func respond(to bytes: UnsafeRawBufferPointer, transport: ListenAddress.Transport,
                          sourceIP: IPAddress, sourcePort: UInt16, set: ServingSet,
                          into out: UnsafeMutableRawBufferPointer, log: inout LogBuffer) -> Int {
        let allowed = set.isAllowed(sourceIP)
        if !allowed && set.config.refusalAction == .drop {
            counters.add(.aclDropped)
            return 0
        }
        // A stateless UAS ignores ACK (§8.2.7) whatever it holds, so it is
        // not worth a parse: half of a PBX's messages to lookupd are ACKs
        // for the final answers it got.
        if bytes.count >= 4, bytes[0] == UInt8(ascii: "A"), bytes[1] == UInt8(ascii: "C"),
           bytes[2] == UInt8(ascii: "K"), bytes[3] == UInt8(ascii: " ") {
            counters.add(transport == .udp ? .udpAck : .tcpAck)
            if !allowed { counters.add(.aclDropped) }
            return 0
        }
        let outcome = parser.parse(bytes)
        if sourceIP != lastSourceIP {
            lastSourceIP = sourceIP
            lastSourceText = SocketAddress.text(sourceIP)
        }
        let source = SIPSourceAddress(ip: lastSourceText, port: sourcePort)
        let request = parser.request
        switch outcome {
        case .request:
            break
        case .response:
            counters.add(.strayResponses)
            return 0
        case .keepAlive:
            return 0
        case .tooLarge:
            counters.add(.tooLarge)
            return 0
        case .garbage:
            counters.add(.malformedDropped)
            return 0
        case .malformed(let malformation, let canRespond):
            guard canRespond, allowed else {
                counters.add(allowed ? .malformedDropped : .aclDropped)
                return 0
            }
            counters.add(.malformedAnswered)
            if log.enabled(.debug) {
                log.begin(.debug)
                log.text("malformed")
                log.field("reason", malformation.description)
                log.field("from", "\(source.ip):\(source.port)")
                log.end()
            }
            return write(request, SIPResponse(SIPRejection(malformation: malformation), source: source), into: out)
        }

        countMethod(request.method, transport)
        if !allowed {
            counters.add(.aclRejected)
            if request.method == .ack { return 0 }
            return write(request, SIPResponse(statusCode: 403, reasonPhrase: "Forbidden", source: source), into: out)
        }
        if let rejection = request.protocolRejection(policy: policy) {
            return write(request, SIPResponse(rejection, source: source), into: out)
        }
        switch request.method {
        case .ack:
            // §8.2.7: a stateless UAS ignores ACK.
            return 0
        case .cancel:
            // §8.2.7: a stateless UAS ignores CANCEL; its INVITE was already
            // answered with a final response, so there is nothing to cancel.
            counters.add(.cancelIgnored)
            return 0
        case .options:
            return write(request, SIPResponse(statusCode: 200, reasonPhrase: "OK", source: source, headers: optionsHeaders), into: out)
        case .invite where !request.toHasTag:
            let bound = transport == .udp ? Responder.amplificationLimit * bytes.count : nil
            return screen(request, set: set, source: source, sourceIP: sourceIP, bound: bound, into: out, log: &log)
        default:
            // BYE and re-INVITEs: a redirect server holds no dialogs.
            return write(request, SIPResponse(statusCode: 481, reasonPhrase: "Call/Transaction Does Not Exist", source: source), into: out)
        }
    }

    private mutating func screen(_ request: SIPRequest, set: ServingSet, source: SIPSourceAddress, sourceIP: IPAddress, bound: Int?,
                                 into out: UnsafeMutableRawBufferPointer, log: inout LogBuffer) -> Int {
        let identity = callerIdentity(request, set: set, sourceIP: sourceIP)
        let screening = set.screening
        let decision = decideAndCount(request, caller: identity, set: set)

        var response: SIPResponse
        switch decision.verdict {
        case .blocked:
            // A directory's own block-response=, else (policies too) the configured one.
            var block = set.config.blockResponse
            if case .directory(let i)? = decision.source, i < set.blockResponses.count { block = set.blockResponses[i] }
            response = SIPResponse(statusCode: block.code, reasonPhrase: block.reasonPhrase, source: source,
                                   labelHeaderName: set.config.labelHeader,
                                   headers: block == .networkBlocked ? networkBlockedHeaders : [])
        case .identified, .contact:
            response = SIPResponse(statusCode: 302, reasonPhrase: "Moved Temporarily", source: source,
                                   contact: .requestURI, identity: identity, labelHeaderName: set.config.labelHeader)
        case .unknown, .anonymous, .invalid, .bypassed:
            if decision.label != nil {
                // A policy's label (anonymous-callers = label, ...) is shown like a directory's.
                response = SIPResponse(statusCode: 302, reasonPhrase: "Moved Temporarily", source: source,
                                       contact: .requestURI, identity: identity, labelHeaderName: set.config.labelHeader)
            } else {
                let unknown = set.config.unknownResponse
                response = SIPResponse(statusCode: unknown.code, reasonPhrase: unknown.reasonPhrase, source: source,
                                       contact: unknown == .redirect ? .requestURI : nil, labelHeaderName: set.config.labelHeader)
            }
        }
        let length: Int
        response.plainQuotedStrings = set.config.labelEscapes == .replace
        if let label = decision.label {
            length = screening.withLabel(label) { bytes in
                response.label = .buffer(bytes)
                return write(request, &response, bound: bound, into: out)
            }
        } else {
            length = write(request, &response, into: out)
        }
        logCall(request, decision, status: response.statusCode, set: set, source: source, log: &log)
        return length
    }

    /// For a response held in a variable (captured by the label closure above): passed in place,
    /// which spares a copy of the whole response per call.
    private func write(_ request: SIPRequest, _ response: inout SIPResponse, bound: Int? = nil, into out: UnsafeMutableRawBufferPointer) -> Int {
        write(request, response, bound: bound, into: out)
    }

    func write(_ request: SIPRequest, _ response: SIPResponse, bound: Int? = nil, into out: UnsafeMutableRawBufferPointer) -> Int {
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
            return result.byteCount
        } catch {
            counters.add(.responseTooLarge)
            return 0
        }
    }

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

    func countVerdict(_ verdict: Verdict) { counters.add(Counter.verdict(verdict)) }

    /// The decision log (docs/OPERATIONS.md): one line per call blocked
    /// (at notice, so a blocked call is never silent short of
    /// log-level = warning, and always in the log file), identified, a
    /// contact's, or one a policy or time window took part in (info); the
    /// others at debug, and never in the file.
    mutating func logCall(_ request: SIPRequest, _ d: Decision, status: Int, set: ServingSet,
                                  source: SIPSourceAddress, log: inout LogBuffer) {
        let decided = d.verdict == .blocked || d.verdict == .identified || d.verdict == .contact || d.policy != nil
            || d.inactiveDirectory != nil
        let level: LogLevel = d.verdict == .blocked ? .notice : decided ? .info : .debug
        let toFile = decided && log.sink?.settings != nil
        guard log.enabled(level) || toFile else { return }
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        line.begin(set.config.operations.logFormat)
        line.field("verdict", d.verdict.rawValue)
        if let number = d.number { line.field("caller", number.description) } else { line.field("caller", request.from.uri.userOrNumber?.bytes ?? empty) }
        line.field("callee", request.requestURI.user?.bytes ?? empty)
        line.number("response", status)
        if let label = d.label { set.screening.withLabel(label) { line.field("label", $0) } }
        if let s = d.source { line.field("source", set.screening.sourceName(s)) }
        if let m = d.match { line.field("match", m.description) }
        if let record = d.journalRecord { line.number("record", Int(record)) }
        if let policy = d.policy { line.field("policy", policy.rawValue) }
        if let inactive = d.inactiveDirectory { line.field("inactive", set.screening.directories[inactive].name) }
        // The rule that decided: the entry (exact number or prefix rule), else the policy.
        if let m = d.match { line.field("rule", m.description) } else if let policy = d.policy { line.field("rule", "policy:" + policy.rawValue) }
        line.field("call-id", request.callID.bytes)
        line.field("from", source.ip.contains(":") ? "[\(source.ip)]:\(source.port)" : "\(source.ip):\(source.port)")
        if let name = request.from.displayName?.bytes, !name.isEmpty { line.field("display-name", name) }
        line.end()
        if decided {
            log.decision(level, line.bytes, recent: d.verdict == .blocked || d.verdict == .identified)
        } else {
            log.begin(level)
            log.appendRaw(line.bytes)
            log.end()
        }
    }
}
