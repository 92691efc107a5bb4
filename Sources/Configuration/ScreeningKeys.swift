import Directory
import Glibc
import Screening
import SystemCalls
import TextRules

extension ConfigKey {
    /// A caller policy: `allow | block | label [TEXT] [active=WINDOWS]`.
    static func policy(_ name: String, _ rule: PolicyRule, _ field: Field<PolicySetting>, summary: String) -> ConfigKey {
        ConfigKey(name: name, syntax: "allow | block | label [TEXT] [active=WINDOWS]", repeatable: false,
                  summary: summary) { s, v throws(ConfigParser.ValueError) in
            s[keyPath: field] = try ConfigParser.parsePolicy(v, rule: rule)
        }
    }
}

extension ConfigParser.State {
    /// `verstat-failed-contacts = trust`, the policy's flag the other way round.
    var trustsContactsOnFailedValidation: Bool {
        get { !config.policies.distrustContactsOnFailedValidation }
        set { config.policies.distrustContactsOnFailedValidation = !newValue }
    }
}

/// The keys for per-callee contacts, caller policies and time windows
/// (docs/POLICIES.md). Kept apart from the core keys; `ConfigParser.keys`
/// lists them after those.
extension ConfigParser {
    static let screeningKeys: [ConfigKey] = [
        .path("contacts-dir",
              summary: "Folder of per-callee contacts: 1001.vcf or 1001.csv holds the contacts of callee 1001 (Request-URI user as sent, or a full number), consulted before the global contacts.") { $0.config.contactsDirectory = $1 },
        .path("blocks-dir",
              summary: "Folder of per-callee block lists: 1001.csv (number,action,label, as a directory source) or 1001.txt (numbers to block) holds what callee 1001 alone blocks, allows or labels, consulted after the contacts and before the directories; a bad file is skipped with its FILE:LINE, the others still apply.") { $0.config.blocksDirectory = $1 },
        ConfigKey(name: "anonymous-callers", syntax: "allow | block | reject 433 | label [TEXT] [active=WINDOWS]", repeatable: false,
                  summary: "Withheld callers (anonymous, restricted, Privacy: id): let through (default), block (with the block response), reject 433 (block with 433 Anonymity Disallowed, RFC 5079), or let through labelled (default label Anonymous).") { s, v throws(ValueError) in
            try parseAnonymousPolicy(&s, v)
        },
        .policy("invalid-callers", .invalid, \.config.policies.invalid,
                summary: "Callers whose identity is not a number (empty, too short, all zeros, letters, a length their country's numbers never have), and numbers in no range of their country's plan (they cannot exist): allow (default), block, or label (default label Invalid Number)."),
        ConfigKey(name: "bypass", syntax: "NUMBER[*][, NUMBER[*]...]", repeatable: true,
                  summary: "Caller numbers never screened (emergency services, internal extensions): digits as sent (110, 1001), a prefix of them (8*), or with + an E.164 number or prefix.") { s, v throws(ValueError) in
            let items = v.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }).map(String.init)
            guard !items.isEmpty else { throw ValueError("expected at least one number") }
            for item in items {
                if let problem = BypassList.syntaxProblem(item) { throw ValueError(problem) }
            }
            s.config.bypass += items
        },
        .policy("verstat-failed", .verstatFailed, \.config.policies.verstatFailed,
                summary: "Callers whose STIR/SHAKEN verstat is TN-Validation-Failed: allow (default), block, or label (default Unverified; it replaces a directory's label, which a spoofer would borrow)."),
        .policy("verstat-no-validation", .verstatNoValidation, \.config.policies.verstatNoValidation,
                summary: "Callers whose verstat is No-TN-Validation: allow (default), block, or label when no directory labels them (default Unverified)."),
        .flag("verstat-failed-contacts", yes: "trust", no: "ignore", \.trustsContactsOnFailedValidation,
              summary: "Whether a contact match counts for a caller whose validation failed (default trust; ignore: the directories decide)."),
        ConfigKey(name: "time-zone", syntax: "ZONE", repeatable: false,
                  summary: "Time zone of active= windows, e.g. Asia/Shanghai or UTC (default: the system's).") { s, v throws(ValueError) in
            guard isTimeZone(v) else {
                throw ValueError("unknown time zone '\(v)' (expected a name from /usr/share/zoneinfo such as Asia/Shanghai, or UTC)")
            }
            s.config.timeZone = v
        },
    ]

    /// `allow`, `block`, `label [TEXT]`, then options (`active=`).
    static func parsePolicy(_ value: String, rule: PolicyRule) throws(ValueError) -> PolicySetting {
        var words = try splitWords(value)
        guard !words.isEmpty else { throw ValueError("expected allow, block or label") }
        var setting = PolicySetting()
        switch words.removeFirst() {
        case "allow": setting.action = .allow
        case "block": setting.action = .block
        case "label":
            var text = CallerPolicies.defaultLabel(rule)
            if let first = words.first, !first.hasPrefix("active=") {
                text = words.removeFirst()
            }
            if let problem = LabelRules.problem(text) { throw ValueError("bad label: \(problem)") }
            setting.action = .label(Array(text.utf8))
        default:
            throw ValueError("expected allow, block or label [TEXT]")
        }
        for word in words {
            guard word.hasPrefix("active=") else { throw ValueError("unexpected '\(word)' (a label with spaces needs quotes; options: active=)") }
            setting.active = try parseActive(String(word.dropFirst("active=".count)))
        }
        return setting
    }

    static func parseActive(_ text: String) throws(ValueError) -> ActiveWindows {
        switch ActiveWindows.parse(text) {
        case .success(let windows): return windows
        case .failure(let error): throw ValueError("active=: \(error)")
        }
    }

    /// A zone the loader can read (`ZoneLoader`): a file under the zoneinfo folder, or a
    /// POSIX TZ string such as `CST-8`. An unknown name would silently mean UTC.
    static func isTimeZone(_ zone: String) -> Bool {
        guard !zone.isEmpty, !zone.contains(".."), zone.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return false }
        if zone == "UTC" || zone == "GMT" { return true }
        if !zone.hasPrefix("/"), FileSystem.isRegularFile(ZoneRules.folder + "/" + zone) { return true }
        return ZoneRules(posix: zone) != nil
    }

    /// Settles what needs the whole file: the bypass list reads numbers
    /// under the numbering plan, which may be set on any line.
    static func finishScreening(_ s: inout State, seen: [String: Int], path: String) throws(Diagnostic) {
        let normalizer = NumberNormalizer(plan: s.config.plan)
        var bypass = BypassList()
        for item in s.config.bypass {
            if let problem = bypass.add(item, normalizer: normalizer) {
                throw Diagnostic(file: path, line: seen["bypass"] ?? 0, message: "bypass: \(problem)")
            }
        }
        s.config.policies.bypass = bypass
    }
}
