import Directory
import TextRules

/// Keys of call treatment: how a rejection is worded (docs/SIP.md, *Rejections*). Kept apart
/// from the core keys; `ConfigParser.keys` lists them after the screening keys.
extension ConfigParser {
    static let treatmentKeys: [ConfigKey] = [
        ConfigKey(name: "redress", syntax: "[url=URL] [tel=E164] [email=ADDRESS] location=LN|TN|LPN|RPN|RLN", repeatable: false,
                  summary: "Where a caller blocked with 603+ asks for redress (ATIS-1000099): at least one of an https URL, an E.164 number and an e-mail address, and location=, the network that blocks as the caller sees it (RLN: the callee's carrier, RPN: the callee's PBX, TN: a transit network, LN and LPN: the caller's own). Required when any block response is 603+.") { s, v throws(ValueError) in
            s.config.treatment.redress = try parseRedress(v)
        },
        ConfigKey(name: "redress-jcard", syntax: "URL", repeatable: false,
                  summary: "The https URL of your signed jCard (RFC 8688): 608 answers then carry Call-Info: <URL>;purpose=jwscard (default: no Call-Info).") { s, v throws(ValueError) in
            if let problem = RedressRules.urlProblem(v) { throw ValueError(problem) }
            s.config.treatment.jcardURL = v
        },
        .flag("redress-q850", \.config.treatment.redressQ850,
              summary: "Whether 603+ answers also carry the Q.850 twin of their Reason, Reason: Q.850;cause=21;text=\"...\" (ATIS-1000099, RFC 3326) (default no)."),
        ConfigKey(name: "block-treatment", syntax: "reject | reject CODE | redirect URI", repeatable: false,
                  summary: "What a blocked call gets (blocks by a policy, or by a directory without its own block-treatment=): reject (default: the block response), reject CODE for a status autodialers drop numbers on (404, 410, 486, 600, 603, 604, 606, 607 or 608), or redirect URI, a 302 to your announcement, voicemail or IVR (a sip: or sips: URI). In proxy mode a redirect to the upstream's own address:port is forwarded there instead.") { s, v throws(ValueError) in
            s.config.treatment.blockTreatment = try BlockTreatment.parse(v)
        },
        ConfigKey(name: "redirect-target", syntax: "URI", repeatable: false,
                  summary: "With mode = redirect: where the 302 of a call lookupd lets through sends the caller, a sip: or sips: URI without a user (the Request-URI's user is kept), e.g. sip:pbx.example.net;transport=udp (default: the Request-URI itself, for a PBX or SBC that reads the verdict and routes the call on). Needed when phones or trunks talk to lookupd directly and follow the 302.") { s, v throws(ValueError) in
            let target = try SIPTargetURI.parse(v)
            guard target.user == nil else { throw ValueError("give the host only (sip:pbx.example.net): the 302 keeps the Request-URI's user") }
            s.config.treatment.redirectTarget = target
        },
        .flag("label-to-caller", \.config.treatment.labelToCaller,
              summary: "Whether the answers lookupd rejects calls with carry the label (default no: a rejection reaches the caller, who would learn how he is labelled; yes when lookupd's client is a PBX that reads it)."),
    ]

    /// `identity-order = pai,rpid,ppi,from`: known names, each once, `from` last (the caller
    /// of a request without any of the others; a name after it would never be read).
    static func parseIdentityOrder(_ value: String) throws(ValueError) -> [IdentityHeader] {
        var order: [IdentityHeader] = []
        for item in value.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }) {
            let name = String(item)
            guard let header = IdentityHeader(rawValue: name) else {
                throw ValueError("unknown identity header '\(name)' (expected \(alternatives(IdentityHeader.self)))")
            }
            guard !order.contains(header) else { throw ValueError("'\(name)' given twice") }
            order.append(header)
        }
        guard !order.isEmpty else { throw ValueError("expected identity headers in order, e.g. pai,rpid,ppi,from") }
        guard order.last == .from else { throw ValueError("from must come last (the caller of a request without the others)") }
        return order
    }

    static func parseRedress(_ value: String) throws(ValueError) -> Redress {
        var url: String?, tel: String?, email: String?, location: Redress.Location?
        for word in try splitWords(value) {
            guard let eq = word.firstIndex(of: "=") else { throw ValueError("expected key=value, got '\(word)'") }
            let key = String(word[..<eq]), text = String(word[word.index(after: eq)...])
            let problem: String?
            switch key {
            case "url":
                guard url == nil else { throw ValueError("url= given twice") }
                (url, problem) = (text, RedressRules.urlProblem(text))
            case "tel":
                guard tel == nil else { throw ValueError("tel= given twice") }
                (tel, problem) = (text, RedressRules.telProblem(text))
            case "email":
                guard email == nil else { throw ValueError("email= given twice") }
                (email, problem) = (text, RedressRules.emailProblem(text))
            case "location":
                guard let l = Redress.Location(rawValue: text) else { throw ValueError("location= must be \(alternatives(Redress.Location.self))") }
                location = l
                problem = nil
            default:
                throw ValueError("unknown redress option '\(key)' (expected url=, tel=, email= or location=)")
            }
            if let problem { throw ValueError("\(key)=: \(problem)") }
        }
        guard url != nil || tel != nil || email != nil else { throw ValueError("give at least one of url=, tel= and email=") }
        // Where the call was released depends on where lookupd sits; a guessed default would
        // tell the caller the wrong network to ask.
        guard let location else { throw ValueError("location= is required (RLN for a carrier serving the callee, RPN for the callee's PBX)") }
        return Redress(url: url, tel: tel, email: email, location: location)
    }

    /// `anonymous-callers`: a policy, or `reject 433` (block with 433 Anonymity Disallowed).
    static func parseAnonymousPolicy(_ s: inout State, _ value: String) throws(ValueError) {
        var words = try splitWords(value)
        s.config.treatment.anonymousRejection433 = false
        if words.first == "reject" {
            guard words.count >= 2, words[1] == "433" else { throw ValueError("reject takes 433 (Anonymity Disallowed, RFC 5079)") }
            words.removeFirst(2)
            s.config.treatment.anonymousRejection433 = true
            s.config.policies.anonymous = try parsePolicy((["block"] + words).joined(separator: " "), rule: .anonymous)
            return
        }
        s.config.policies.anonymous = try parsePolicy(value, rule: .anonymous)
    }

    /// 603+ tells the caller whom to ask for redress: it is refused without a redress line.
    /// `line` is the first line that asks for 603+.
    static func finishTreatment(_ s: State, seen: [String: Int], path: String) throws(Diagnostic) {
        if let line = seen["redirect-target"], s.config.mode != .redirect {
            throw Diagnostic(file: path, line: line, message: "'redirect-target' only applies to mode = redirect (a proxy forwards calls to its upstream)")
        }
        if let line = s.firstNetworkBlockedLine, s.config.treatment.redress == nil {
            throw Diagnostic(file: path, line: line,
                             message: "603+ needs a 'redress = url=... | tel=... | email=... location=...' line (ATIS-1000099 asks for a redress contact)")
        }
    }
}
