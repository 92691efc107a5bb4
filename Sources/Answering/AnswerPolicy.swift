import Addresses
import Configuration
import Screening
import SIP

/// How a serving set answers, compiled once from its configuration when the set is loaded:
/// who is answered, whose P-Asserted-Identity is believed, the status each verdict gets, the
/// label header, which protocol checks apply, what a proxied call's display name becomes. A
/// request never reads configuration types; it reads this.
///
/// A class, so that a request borrows it by reference instead of copying a dozen fields.
///
/// Threading: immutable, `Sendable`; every worker shares the one in its serving set.
public final class AnswerPolicy: Sendable {
    /// nil: every source is answered.
    let allowFrom: [CIDR]?
    /// `refuse-action = drop`: a source outside allow-from gets nothing at all.
    public let dropsRefused: Bool
    /// `trust-asserted-identity-from`: peers whose asserted identity is the caller.
    let trustedPeers: [CIDR]
    /// `identity-order`: the headers a trusted peer's caller is read from, first present first.
    let identityOrder: [IdentityHeader]
    /// Per directory, in priority order: the answer to a number it blocks.
    let blockAnswers: [LocalAnswer]
    /// `block-response`: blocks by a policy, or by a directory without its own.
    let defaultBlock: LocalAnswer
    /// `anonymous-callers = reject 433`: 433 Anonymity Disallowed (RFC 5079); nil: the
    /// policy's block gets `defaultBlock`.
    let anonymousRejection: LocalAnswer?
    /// `label-to-caller`: rejections carry the label too.
    let labelToCaller: Bool
    /// A labelled 302 carries the label: always without `redirect-target` (it goes to the SBC
    /// or Kamailio route that asked); with one it goes to the caller's own UA, so only with
    /// `label-to-caller = yes`.
    let labelsRedirects: Bool
    /// The 302 of `block-treatment = redirect`: as a labelled 302 in redirect mode; a proxy
    /// answers it to the caller himself, so there only with `label-to-caller = yes`.
    let labelsBlockRedirects: Bool
    /// Identified callers, contacts and callers a policy labels: 302 to the Request-URI with
    /// the label and the caller's identity.
    let labelled: LocalAnswer
    /// `unknown-response` for callers without a label.
    let unknown: LocalAnswer
    /// OPTIONS to lookupd itself, as a redirect server and as a proxy (their Allow differs).
    let redirectOptions: LocalAnswer
    let proxyOptions: LocalAnswer
    public let labelHeader: String
    /// Proxy mode: `label-format` as the forwarded From's display name.
    let displayName: [SIPDisplayNamePart]
    /// `label-format` names `{attribution}`: only then does a forwarded call look it up.
    let displayNameHasAttribution: Bool
    let labelInAssertedIdentity: Bool
    /// `label-escapes = replace`: quoted strings lookupd writes hold no escapes (`"` and `\`
    /// of a label become `'` and `/`).
    let plainQuotedStrings: Bool
    public let logFormat: LogFormat
    /// `log-unknown`: unknown callers are decision-log lines too.
    public let logUnknown: Bool
    /// `time-zone`, for `active=` windows.
    public let zone: ZoneRules

    public init(config: LookupdConfig, zone: ZoneRules) {
        allowFrom = config.allowFrom
        dropsRefused = config.refusalAction == .drop
        trustedPeers = config.trustAssertedIdentityFrom
        identityOrder = config.identityOrder
        let treatment = config.treatment
        // The directory's own block-treatment= or block-response=, else block-treatment, else
        // block-response.
        let global = treatment.blockTreatment == .reject ? nil : treatment.blockTreatment
        defaultBlock = LocalAnswer(treatment: global ?? .reject, response: config.blockResponse, config: config)
        blockAnswers = config.directories.map {
            LocalAnswer(treatment: $0.blockTreatment ?? ($0.blockResponse != nil ? .reject : global ?? .reject),
                        response: $0.blockResponse ?? config.blockResponse, config: config)
        }
        anonymousRejection = treatment.anonymousRejection433
            ? LocalAnswer(statusCode: 433, reasonPhrase: "Anonymity Disallowed", isRejection: true) : nil
        labelToCaller = treatment.labelToCaller
        labelsRedirects = treatment.redirectTarget == nil || treatment.labelToCaller
        labelsBlockRedirects = config.mode == .proxy ? treatment.labelToCaller : labelsRedirects
        // redirect-target: the callee at the PBX; without it, the Request-URI, for a PBX or SBC
        // that reads the verdict and routes the call itself.
        let onward = treatment.redirectTarget.map { SIPContact.requestUser(scheme: $0.scheme, host: $0.host) } ?? .requestURI
        labelled = LocalAnswer(statusCode: 302, reasonPhrase: "Moved Temporarily", contact: onward, assertsIdentity: true)
        let u = config.unknownResponse
        unknown = LocalAnswer(statusCode: u.code, reasonPhrase: u.reasonPhrase, contact: u == .redirect ? onward : nil)
        redirectOptions = LocalAnswer(options: .standard)
        proxyOptions = LocalAnswer(options: .proxy)
        labelHeader = config.labelHeader
        displayName = config.proxy.labelFormat.parts.map {
            switch $0 {
            case .text(let t): return .text(t)
            case .label: return .label
            case .name: return .originalName
            case .attribution: return .attribution
            }
        }
        displayNameHasAttribution = config.proxy.labelFormat.parts.contains(.attribution)
        labelInAssertedIdentity = config.proxy.labelInAssertedIdentity
        plainQuotedStrings = config.labelEscapes == .replace
        logFormat = config.operations.logFormat
        logUnknown = config.operations.logUnknown
        self.zone = zone
    }


    /// Whether `address` may be answered (allow-from).
    public func allows(_ address: IPAddress) -> Bool {
        guard let allowFrom else { return true }
        for block in allowFrom where block.contains(address) { return true }
        return false
    }

    func trusts(_ address: IPAddress) -> Bool {
        for block in trustedPeers where block.contains(address) { return true }
        return false
    }

    /// The local answer to an initial INVITE's verdict (redirect mode; proxy mode answers only
    /// blocked callers itself).
    func answer(to decision: Decision) -> LocalAnswer {
        switch decision.verdict {
        case .blocked:
            if decision.policy == .anonymous, let anonymousRejection { return anonymousRejection }
            // A directory's own block-response=, else (policies too) the configured one.
            if case .directory(let i)? = decision.source, i < blockAnswers.count { return blockAnswers[i] }
            return defaultBlock
        case .identified, .contact:
            return labelled
        case .unknown, .anonymous, .invalid, .bypassed:
            // A policy's label (anonymous-callers = label, ...) is shown like a directory's.
            return decision.label != nil ? labelled : unknown
        }
    }
}

/// A final response lookupd gives itself, all but the request-specific parts.
///
/// A class, so that choosing one per call copies no strings or arrays.
///
/// Threading: immutable; `Sendable`.
final class LocalAnswer: Sendable {
    let statusCode: Int
    let reasonPhrase: String
    let contact: SIPContact?
    /// A P-Asserted-Identity with the caller's URI (the 302 of a labelled caller).
    let assertsIdentity: Bool
    let headers: [SIPHeaderField]
    /// A call rejected: the label stays out unless `label-to-caller = yes`.
    let isRejection: Bool
    /// 603+: a `Reason` whose text ends with the decision's id, written around it.
    let reasonAroundID: (prefix: String, suffix: String)?
    /// `redress-q850 = yes`: the prefix of its Q.850 twin (same text, id and location).
    let q850Prefix: String?
    /// A block's treatment as the decision log names it (`reject`, `reject-486`, `redirect`).
    let treatment: String?
    /// `block-treatment = redirect`: the 302 of a blocked call (its label goes as a 302's).
    let isBlockRedirect: Bool
    /// Proxy mode, `block-treatment = redirect` to the upstream's own address and port: the
    /// INVITE is forwarded there with this Request-URI instead of answered.
    let forwardURI: String?

    init(statusCode: Int, reasonPhrase: String, contact: SIPContact? = nil, assertsIdentity: Bool = false,
         headers: [SIPHeaderField] = [], isRejection: Bool = false, reasonAroundID: (prefix: String, suffix: String)? = nil,
         q850Prefix: String? = nil, treatment: String? = nil, isBlockRedirect: Bool = false, forwardURI: String? = nil) {
        self.q850Prefix = q850Prefix
        self.statusCode = statusCode
        self.reasonPhrase = reasonPhrase
        self.contact = contact
        self.assertsIdentity = assertsIdentity
        self.headers = headers
        self.isRejection = isRejection
        self.reasonAroundID = reasonAroundID
        self.treatment = treatment
        self.isBlockRedirect = isBlockRedirect
        self.forwardURI = forwardURI
    }

    /// The headers of one answer: the fixed ones, then the 603+ Reason with `id`.
    func headers(id: String?) -> [SIPHeaderField] {
        guard let reasonAroundID, let id else { return headers }
        var all = headers + [SIPHeaderField("Reason", reasonAroundID.prefix + id + reasonAroundID.suffix)]
        if let q850Prefix { all.append(SIPHeaderField("Reason", q850Prefix + id + reasonAroundID.suffix)) }
        return all
    }

    /// A blocked call's answer under `treatment`; `response` is the block response `reject` means.
    convenience init(treatment: BlockTreatment, response: BlockResponse, config: LookupdConfig) {
        let name = treatment.logName
        switch treatment {
        case .reject:
            self.init(block: response, treatment: config.treatment, name: name)
        case .rejectWith(let code):
            if code != 603, let same = BlockResponse(rawValue: String(code)) {
                // 607 and 608 as block-response words them (608 with its jCard).
                self.init(block: same, treatment: config.treatment, name: name)
            } else {
                self.init(statusCode: code, reasonPhrase: BlockTreatment.rejectCodes[code] ?? "Decline", isRejection: true, treatment: name)
            }
        case .redirect(let uri):
            // Forwarded only to the configured upstream, by its address: never to somewhere a
            // request names.
            var forward: String?
            if config.mode == .proxy, let upstream = config.proxy.upstream {
                let (host, port) = uri.hostAndPort
                if IPAddress(host) == upstream.host, (port ?? (uri.scheme == "sips" ? 5061 : 5060)) == Int(upstream.port) {
                    forward = uri.text
                }
            }
            self.init(statusCode: 302, reasonPhrase: "Moved Temporarily", contact: .uri(uri.text), treatment: name,
                      isBlockRedirect: true, forwardURI: forward)
        }
    }

    /// 200 with `Allow` and `Accept: application/sdp` (dispatcher and qualify probes accept only 200).
    convenience init(options checks: SIPProtocolPolicy) {
        self.init(statusCode: 200, reasonPhrase: "OK",
                  headers: [SIPHeaderField("Allow", checks.allowHeaderValue), SIPHeaderField("Accept", "application/sdp")])
    }

    /// 603, 607, 608 (with RFC 8688's `Call-Info` when `redress-jcard` is set), or 603+:
    /// `603 Network Blocked` with the ATIS-1000099 Reason,
    /// `SIP;cause=603;text="v=analytics1;url=...;tel=...;email=...;id=ID";location=RLN`,
    /// only the configured contacts, in that order. The values were checked by `RedressRules`
    /// when the configuration was read (none holds `"`, `\` or `;`), so the quoted text needs
    /// no escapes. With `redress-q850`, the Q.850 twin follows (RFC 3326, RFC 6432): cause 21,
    /// Call Rejected, the ISUP cause a 603 maps to, with the same text and location (RFC 8606),
    /// so a gateway toward ISUP that reads only Q.850 passes the redress contacts on.
    convenience init(block: BlockResponse, treatment: TreatmentConfig, name: String? = nil) {
        var headers: [SIPHeaderField] = []
        var reason: (prefix: String, suffix: String)? = nil
        var q850: String? = nil
        switch block {
        case .rejected:
            if let url = treatment.jcardURL { headers.append(SIPHeaderField("Call-Info", "<\(url)>;purpose=jwscard")) }
        case .networkBlocked:
            if let redress = treatment.redress {
                var text = "v=analytics1"
                if let url = redress.url { text += ";url=" + url }
                if let tel = redress.tel { text += ";tel=" + tel }
                if let email = redress.email { text += ";email=" + email }
                reason = ("SIP;cause=603;text=\"" + text + ";id=", "\";location=" + redress.location.rawValue)
                if treatment.redressQ850 { q850 = "Q.850;cause=21;text=\"" + text + ";id=" }
            } else {
                // Only a configuration built in code gets here: lookupd.conf refuses 603+
                // without redress.
                headers.append(SIPHeaderField("Reason", "SIP;cause=603;text=\"Network Blocked\""))
            }
        case .decline, .unwanted:
            break
        }
        self.init(statusCode: block.code, reasonPhrase: block.reasonPhrase, headers: headers, isRejection: true,
                  reasonAroundID: reason, q850Prefix: q850, treatment: name)
    }
}
