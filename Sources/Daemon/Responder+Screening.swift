import Addresses
import Configuration
import Screening
import SIP

/// The call context screening needs beyond the caller, read from the
/// request, and the counters and log fields of caller policies.
extension Responder {
    /// Who is calling: P-Asserted-Identity from a trusted peer (a tel: value
    /// first, it carries the number plainly), otherwise From. The same in
    /// redirect and proxy mode.
    func callerIdentity(_ request: SIPRequest, set: ServingSet, sourceIP: IPAddress) -> SIPIdentityURI {
        guard !set.config.trustAssertedIdentityFrom.isEmpty, set.isTrusted(sourceIP) else { return .from }
        let asserted = request.assertedIdentities
        if let tel = asserted.indices.first(where: { asserted[$0].uri.scheme == .tel }) { return .assertedIdentity(tel) }
        return asserted.isEmpty ? .from : .assertedIdentity(asserted.startIndex)
    }

    /// The verdict for an initial INVITE from `identity`, counted (verdict,
    /// its source, the policy that acted).
    func decideAndCount(_ request: SIPRequest, caller identity: SIPIdentityURI, set: ServingSet) -> Decision {
        var uri = request.from.uri
        if case .assertedIdentity(let i) = identity { uri = request.assertedIdentities[i].uri }
        let decision = decideCall(request, caller: uri.userOrNumber, callerURI: uri, set: set)
        countVerdict(decision.verdict)
        verdictSources.add(decision)
        countPolicy(decision)
        return decision
    }

    func decideCall(_ request: SIPRequest, caller: SIPText?, callerURI: SIPURI, set: ServingSet) -> Decision {
        let screening = set.screening
        let context = CallContext(callee: request.requestURI.user?.bytes ?? UnsafeRawBufferPointer(start: nil, count: 0),
                                  verstat: Responder.verstat(callerURI),
                                  privacy: request.privacy.contains(.id),
                                  time: screening.usesTime ? set.clock.now() : nil)
        return screening.decide(caller: caller?.bytes, context: context)
    }

    /// `verstat` as a URI parameter (`tel:+1...;verstat=...`,
    /// `sip:...@host;verstat=...`) or, as 3GPP TS 24.229 writes it for a
    /// sip: URI with user=phone, inside the user part
    /// (`sip:+1...;verstat=...@host`).
    static func verstat(_ uri: SIPURI) -> Verstat {
        if let value = uri.parameters.value("verstat") { return Verstat(value.bytes) }
        guard let user = uri.rawUser else { return .absent }
        let bytes = user.bytes
        let name: StaticString = ";verstat="
        let count = name.utf8CodeUnitCount
        guard bytes.count > count else { return .absent }
        var i = 0
        while i + count <= bytes.count {
            var matches = true
            for k in 0..<count where bytes[i + k] | 0x20 != name.utf8Start[k] | 0x20 {
                matches = false
                break
            }
            if matches {
                var end = i + count
                while end < bytes.count, bytes[end] != UInt8(ascii: ";") { end += 1 }
                return Verstat(UnsafeRawBufferPointer(rebasing: bytes[(i + count)..<end]))
            }
            i += 1
        }
        return .absent
    }

    func countPolicy(_ d: Decision) {
        if d.inactiveDirectory != nil { counters.add(.policyInactiveDirectory) }
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
}
