import Addresses
import Configuration
import Identity
import Screening
import SIP

/// Who is calling, the call context screening needs beyond the caller, and the counters and
/// decision-log line of a screened call. The same in redirect and proxy mode.
extension Answerer {
    /// From a trusted peer, the first of `identity-order` the request carries:
    /// P-Asserted-Identity or P-Preferred-Identity (a tel: value first, it carries the number
    /// plainly), the Remote-Party-ID of the calling party, else From. Otherwise From.
    func callerIdentity(_ request: SIPRequest, policy: AnswerPolicy, source: IPAddress) -> SIPIdentityURI {
        guard !policy.trustedPeers.isEmpty, policy.trusts(source) else { return .from }
        func telFirst(_ list: [SIPNameAddress]) -> Int? {
            list.firstIndex { $0.uri.scheme == .tel } ?? (list.isEmpty ? nil : 0)
        }
        for header in policy.identityOrder {
            switch header {
            case .pai: if let i = telFirst(Array(request.assertedIdentities)) { return .assertedIdentity(i) }
            case .rpid: if let i = request.callingPartyIDIndex { return .remotePartyID(i) }
            case .ppi: if let i = telFirst(request.preferredIdentities) { return .preferredIdentity(i) }
            case .from: return .from
            }
        }
        return .from
    }

    /// The verdict for an initial INVITE from `identity`, counted (verdict, its source, the
    /// policy that acted). Screening reads the identity SIP extracted (number decoded once,
    /// phone-context, verstat), never the URI itself: `lookupd query` of the same URI reads
    /// it through the same SIP code and gets the same answer.
    /// The decision for a caller, not yet counted (`count`): it may be made again.
    func screen(_ request: SIPRequest, caller identity: SIPIdentityURI, set: ServingSet, now: WallTime) -> Decision {
        let caller = request.callerIdentity(identity)
        let screening = set.screening
        let context = CallContext(callee: request.requestURI.user?.bytes ?? UnsafeRawBufferPointer(start: nil, count: 0),
                                  verstat: Verstat(caller.verstat),
                                  privacy: request.privacy.contains(.id) || request.remotePartyIDWithheld,
                                  time: screening.usesTime ? set.policy.zone.localTime(utc: now.seconds) : nil)
        return screening.decide(caller: caller, context: context)
    }

    /// Counts the decision an answer was given from.
    func count(_ decision: Decision) {
        counters.add(Counter.verdict(decision.verdict))
        verdictSources.add(decision)
        countPolicy(decision)
    }

    func countPolicy(_ d: Decision) {
        if d.inactiveDirectory != nil { counters.add(.policyInactiveDirectory) }
        if d.damagedDirectory != nil { counters.add(.directoryDamaged) }
        guard let policy = d.policy else { return }
        let blocked = d.verdict == .blocked
        switch policy {
        case .bypass: counters.add(.policyBypass)
        case .anonymous: counters.add(blocked ? .policyAnonymousBlock : .policyAnonymousLabel)
        case .invalid: counters.add(blocked ? .policyInvalidBlock : .policyInvalidLabel)
        case .verstatFailed: counters.add(blocked ? .policyVerstatFailedBlock : .policyVerstatFailedLabel)
        case .verstatNoValidation: counters.add(blocked ? .policyNoValidationBlock : .policyNoValidationLabel)
        case .contactDistrusted: counters.add(.policyContactDistrusted)
        }
    }

    /// The decision log (docs/OPERATIONS.md): one line per call blocked (at notice, so a
    /// blocked call is never silent short of log-level = warning, and always in the log file),
    /// identified, a contact's, or one a policy or time window took part in (info); the others
    /// at debug, and never in the file. `status` 0: forwarded.
    mutating func logCall(_ request: SIPRequest, _ d: Decision, status: Int, set: ServingSet,
                          source: SIPSourceAddress, now: WallTime, id: String? = nil, treatment: String? = nil, log: inout LogLines) {
        let (level, decided) = DecisionLine.level(d, logUnknown: set.policy.logUnknown)
        let toFile = decided && log.writesFile
        guard log.enabled(level) || toFile else { return }
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        line.begin(set.policy.logFormat, at: now)
        line.field("verdict", d.verdict.rawValue)
        if let number = d.number { line.e164("caller", number.value) } else { line.field("caller", request.from.uri.userOrNumber?.bytes ?? empty) }
        line.field("callee", request.requestURI.user?.bytes ?? empty)
        line.number("response", status)
        line.decisionFields(d, set: set, now: now)
        line.field("call-id", request.callID.bytes)
        line.address("from", ip: source.ip, port: source.port)
        // The decision id (the one a 603+ gave the caller, who quotes it asking for redress).
        if let id {
            line.field("id", id)
        } else {
            let (high, low) = DecisionID.words(request, source: source)
            line.hex("id", high, low)
        }
        // What a blocked call got (block-treatment): reject, reject-CODE or redirect.
        if d.verdict == .blocked, let treatment { line.field("treatment", treatment) }
        // Last: the caller's own text.
        if let name = request.from.displayName?.bytes, !name.isEmpty { line.field("display-name", name) }
        line.end()
        line.submit(d, level: level, decided: decided, to: &log)
    }
}

extension DecisionLine {
    /// The level of a decision's line, and whether it is one the log file keeps: blocked (at
    /// notice, so a blocked call is never silent short of log-level = warning), identified, a
    /// contact's, one a policy, a time window or an allow entry took part in, and with
    /// `log-unknown` an unknown caller's (info); the others at debug, never in the file.
    static func level(_ d: Decision, logUnknown: Bool) -> (LogLevel, decided: Bool) {
        let decided = d.verdict == .blocked || d.verdict == .identified || d.verdict == .contact || d.policy != nil
            || d.inactiveDirectory != nil || d.allowed || (d.verdict == .unknown && logUnknown)
        return (d.verdict == .blocked ? .notice : decided ? .info : .debug, decided)
    }

    /// What decided, the same for calls and HTTP lookups: label, source, the entry or the
    /// policy, and the blocks an allow entry overrode.
    mutating func decisionFields(_ d: Decision, set: ServingSet, now: WallTime) {
        if let label = d.label { set.screening.withLabel(label) { field("label", $0) } }
        if let s = d.source { field("source", set.screening.sourceName(s)) }
        if let m = d.match { pattern("match", m) }
        if let record = d.journalRecord { number("record", Int(record)) }
        if let revision = d.replicatedRevision { number("revision", Int(revision)) }
        if let policy = d.policy { field("policy", policy.rawValue) }
        if let inactive = d.inactiveDirectory { field("inactive", set.screening.directories[inactive].name) }
        if d.allowed {
            field("allowed", "yes")
            let time = set.screening.usesTime ? set.policy.zone.localTime(utc: now.seconds) : nil
            let overridden = set.screening.overriddenBlocks(d, context: CallContext(time: time))
            if !overridden.isEmpty {
                field("overridden", overridden.map { set.screening.directories[$0.directory].name + ":" + $0.match.description }
                    .joined(separator: ","))
            }
        }
        // The rule that decided: the entry (exact number or prefix rule), else the policy.
        if let m = d.match { pattern("rule", m) } else if let policy = d.policy { field("rule", "policy:" + policy.rawValue) }
    }

    /// `calls`: a call's line, which the status page's recent calls may list.
    func submit(_ d: Decision, level: LogLevel, decided: Bool, calls: Bool = true, to log: inout LogLines) {
        if decided {
            log.decision(level, bytes, recent: calls && (d.verdict == .blocked || d.verdict == .identified))
        } else {
            log.begin(level)
            log.appendRaw(bytes)
            log.end()
        }
    }
}

/// The decision-log line of an HTTP lookup (`/lookup`, `/lookup.json`): where a PBX asks
/// over HTTP (FreeSWITCH's mod_cidlookup, Asterisk's CURL()), that lookup is the call's
/// decision, so it is logged as a call's is, with `via=http` and its id instead of the SIP
/// transaction's fields, and `lookupd log --id` finds it.
///
/// Threading: belongs to one thread (the HTTP listener's).
public struct LookupLogLine {
    private var line = DecisionLine()

    public init() {}

    public mutating func log(_ d: Decision, input: UnsafeRawBufferPointer, callee: UnsafeRawBufferPointer, id: String,
                             set: ServingSet, now: WallTime, to log: inout LogLines) {
        let (level, decided) = DecisionLine.level(d, logUnknown: set.policy.logUnknown)
        guard log.enabled(level) || (decided && log.writesFile) else { return }
        line.begin(set.policy.logFormat, at: now)
        line.field("verdict", d.verdict.rawValue)
        if let number = d.number { line.e164("caller", number.value) } else { line.field("caller", input) }
        line.field("callee", callee)
        line.decisionFields(d, set: set, now: now)
        line.field("via", "http")
        line.field("id", id)
        line.end()
        // Not among the status page's recent calls: its own lookup form asks here too.
        line.submit(d, level: level, decided: decided, calls: false, to: &log)
    }
}
