/// `redress`: where a caller whose call a 603+ answer blocked asks for redress
/// (ATIS-1000099). At least one of url, tel and email.
public struct Redress: Equatable, Sendable {
    /// RFC 8606's `location` of the Reason header: which network released the call, as the
    /// caller's side sees it.
    public enum Location: String, Sendable, CaseIterable {
        /// Public network serving the local user (the caller's own carrier).
        case localNetwork = "LN"
        /// Transit network.
        case transit = "TN"
        /// Private network serving the local user.
        case localPrivate = "LPN"
        /// Private network serving the remote user (the callee's PBX).
        case remotePrivate = "RPN"
        /// Public network serving the remote user (the callee's carrier).
        case remoteNetwork = "RLN"
    }

    public var url: String?
    public var tel: String?
    public var email: String?
    public var location: Location

    public init(url: String? = nil, tel: String? = nil, email: String? = nil, location: Location) {
        self.url = url
        self.tel = tel
        self.email = email
        self.location = location
    }
}

/// How rejections are worded beyond their status (issue 17): the 603+ redress, RFC 8688's
/// jCard on a 608, 433 for withheld callers, and whether the label goes back with a rejection.
public struct TreatmentConfig: Sendable {
    public var redress: Redress?
    /// `redress-jcard`: the https URL of the blocking party's jCard (RFC 8688 §3.2), sent as
    /// `Call-Info: <URL>;purpose=jwscard` on 608 answers.
    public var jcardURL: String?
    /// `anonymous-callers = reject 433`: withheld callers get 433 Anonymity Disallowed
    /// (RFC 5079) instead of the block response.
    public var anonymousRejection433 = false
    /// `label-to-caller`: whether lookupd's own rejections carry the label. Off by default: a
    /// rejection ends up with the caller, who would learn how he is labelled.
    public var labelToCaller = false
    /// `redress-q850`: a 603+ answer also carries `Reason: Q.850;cause=21` (Call Rejected).
    public var redressQ850 = false
    /// `redirect-target`: where the 302 of a call lookupd lets through sends the caller (the
    /// Request-URI's user at this host); nil: back to the Request-URI itself.
    public var redirectTarget: SIPTargetURI?
    /// `block-treatment`: blocks by a policy, or by a directory without its own.
    public var blockTreatment = BlockTreatment.reject

    public init() {}
}

/// A sip: or sips: URI lookupd sends callers to in a 302 (`redirect-target`), checked when the
/// configuration is read: it goes into a Contact header as written.
public struct SIPTargetURI: Sendable, Equatable {
    /// `sip` or `sips`, lower case.
    public let scheme: String
    /// The user part, %-escapes as written; nil without one.
    public let user: String?
    /// Everything after the `@` (or the scheme): host, optional port, `;parameters`.
    public let host: String

    public var text: String { scheme + ":" + (user.map { $0 + "@" } ?? "") + host }

    /// The host (an IPv6 address without its brackets) and the port, when one is written.
    public var hostAndPort: (host: String, port: Int?) {
        let hostPort = host.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0]
        if hostPort.hasPrefix("["), let close = hostPort.firstIndex(of: "]") {
            let after = hostPort[hostPort.index(after: close)...]
            return (String(hostPort[hostPort.index(after: hostPort.startIndex)..<close]), after.isEmpty ? nil : Int(after.dropFirst()))
        }
        let parts = hostPort.split(separator: ":", omittingEmptySubsequences: false)
        return (String(parts[0]), parts.count == 2 ? Int(parts[1]) : nil)
    }

    /// Refuses what a Contact cannot carry or a UA could not reach: another scheme, no host,
    /// a port out of range, `?headers`, characters outside RFC 3261's URI grammar, and
    /// lookupd's own redirect mark (it would make every call look like one that came back).
    public static func parse(_ value: String) throws(ConfigParser.ValueError) -> SIPTargetURI {
        let example = "a sip: or sips: URI such as sip:pbx.example.net;transport=udp"
        guard let colon = value.firstIndex(of: ":") else { throw ConfigParser.ValueError("expected \(example)") }
        let scheme = value[..<colon].lowercased()
        guard scheme == "sip" || scheme == "sips" else { throw ConfigParser.ValueError("expected \(example), not a \(scheme): URI") }
        var rest = Substring(value[value.index(after: colon)...])
        // RFC 3261 §25.1: unreserved, escaped and the URI punctuation; no space, quote or angle.
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'()%&=+$,;:[]/@")
        if let bad = rest.first(where: { !allowed.contains($0) }) {
            throw ConfigParser.ValueError(bad == "?" ? "a redirect URI takes no ?headers" : "'\(bad)' has no place in a SIP URI (escape it as %XX)")
        }
        var user: String?
        if let at = rest.lastIndex(of: "@") {
            user = String(rest[..<at])
            guard !user!.isEmpty, !user!.contains("@") else { throw ConfigParser.ValueError("expected user@host after \(scheme):") }
            rest = rest[rest.index(after: at)...]
        }
        let hostPort = rest.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0]
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]"), close > hostPort.index(after: hostPort.startIndex),
                  hostPort[hostPort.index(after: hostPort.startIndex)..<close].allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw ConfigParser.ValueError("expected an IPv6 address between [ and ]")
            }
            let after = hostPort[hostPort.index(after: close)...]
            guard after.isEmpty || after.hasPrefix(":") else { throw ConfigParser.ValueError("expected :PORT after the IPv6 host") }
            if !after.isEmpty { try checkPort(after.dropFirst()) }
        } else {
            let parts = hostPort.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2, let name = parts.first, !name.isEmpty,
                  name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }) else {
                throw ConfigParser.ValueError("expected \(example): no host in '\(value)'")
            }
            if parts.count == 2 { try checkPort(parts[1]) }
        }
        for parameter in rest.split(separator: ";").dropFirst() {
            let name = parameter.split(separator: "=", maxSplits: 1)[0]
            if name.lowercased() == "lookupd" { throw ConfigParser.ValueError("the lookupd= parameter is lookupd's own redirect mark") }
        }
        return SIPTargetURI(scheme: scheme, user: user, host: String(rest))
    }

    private static func checkPort(_ text: Substring) throws(ConfigParser.ValueError) {
        guard let port = Int(text), (1...65535).contains(port) else { throw ConfigParser.ValueError("expected a port from 1 to 65535, got '\(text)'") }
    }
}

/// `block-treatment`: what a blocked call gets, per directory and for the policies.
public enum BlockTreatment: Sendable, Equatable {
    /// The block response (`block-response`, or the directory's own).
    case reject
    /// A status autodialers drop numbers on (`rejectCodes`).
    case rejectWith(Int)
    /// 302 to the operator's announcement, voicemail or IVR.
    case redirect(SIPTargetURI)

    /// 404, 410, 486 and the 6xx codes: what autodialers read as "this number is dead or busy,
    /// drop it". Others (a 5xx, a 3xx) would make a caller retry or go elsewhere.
    public static let rejectCodes: [Int: String] = [
        404: "Not Found", 410: "Gone", 486: "Busy Here", 600: "Busy Everywhere", 603: "Decline",
        604: "Does Not Exist Anywhere", 606: "Not Acceptable", 607: "Unwanted", 608: "Rejected",
    ]

    /// How the decision log names it: `reject`, `reject-486`, `redirect`.
    public var logName: String {
        switch self {
        case .reject: return "reject"
        case .rejectWith(let code): return "reject-\(code)"
        case .redirect: return "redirect"
        }
    }

    /// `reject`, `reject CODE` or `redirect URI`.
    public static func parse(_ value: String) throws(ConfigParser.ValueError) -> BlockTreatment {
        let words = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        let codes = rejectCodes.keys.sorted().map(String.init)
        switch words.first {
        case "reject" where words.count == 1:
            return .reject
        case "reject" where words.count == 2:
            guard let code = Int(words[1]), rejectCodes[code] != nil else {
                throw ConfigParser.ValueError("reject takes " + codes.dropLast().joined(separator: ", ") + " or " + codes.last! + ", not '\(words[1])'")
            }
            return .rejectWith(code)
        case "redirect" where words.count == 2:
            return .redirect(try SIPTargetURI.parse(words[1]))
        default:
            throw ConfigParser.ValueError("expected reject, reject CODE or redirect URI (e.g. redirect sip:announcement@pbx.example.net)")
        }
    }
}
