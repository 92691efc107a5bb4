import Directory

/// The configurable rules about callers rather than numbers: withheld and
/// invalid identities, numbers that skip screening, and STIR/SHAKEN
/// verification results. Each has a config key; docs/POLICIES.md describes
/// them.
public enum PolicyRule: String, Sendable, CaseIterable, CustomStringConvertible {
    /// `bypass`: the caller skipped every check.
    case bypass
    /// `anonymous-callers`: withheld identities.
    case anonymous = "anonymous-callers"
    /// `invalid-callers`: empty, too short, all-zero and other non-numbers, and numbers
    /// their country's plan holds no range for.
    case invalid = "invalid-callers"
    /// `verstat-failed`: verstat=TN-Validation-Failed.
    case verstatFailed = "verstat-failed"
    /// `verstat-no-validation`: verstat=No-TN-Validation.
    case verstatNoValidation = "verstat-no-validation"
    /// `verstat-failed-contacts = ignore`: a contact match was not trusted
    /// because the caller's validation failed.
    case contactDistrusted = "verstat-failed-contacts"

    public var description: String { rawValue }
}

/// What a policy does to the callers it covers.
public enum PolicyAction: Equatable, Sendable {
    case allow
    /// Let the call through, shown with this label.
    case label([UInt8])
    /// Reject with the configured block response.
    case block
}

/// A policy's action and, optionally, the time windows it is in force
/// (outside them it allows).
public struct PolicySetting: Equatable, Sendable {
    public var action: PolicyAction
    public var active: ActiveWindows?

    public init(_ action: PolicyAction = .allow, active: ActiveWindows? = nil) {
        self.action = action
        self.active = active
    }

    func effective(at time: LocalTime?) -> PolicyAction {
        if let active, let time, !active.contains(time) { return .allow }
        return action
    }
}

/// The STIR/SHAKEN verification result a terminating network puts in the
/// `verstat` parameter of the caller's URI (3GPP TS 24.229 §7.2A.20).
public enum Verstat: Equatable, Sendable {
    case absent
    case passed
    case failed
    case noValidation
    /// A value this lookupd does not know; treated as absent.
    case other

    /// The parameter's value as written; nil when there is none.
    public init(_ value: UnsafeRawBufferPointer?) {
        guard let value else { self = .absent; return }
        if Verstat.equal(value, "TN-Validation-Passed") { self = .passed }
        else if Verstat.equal(value, "TN-Validation-Failed") { self = .failed }
        else if Verstat.equal(value, "No-TN-Validation") { self = .noValidation }
        else { self = .other }
    }

    public init(_ text: String) {
        var text = text
        self = text.withUTF8 { Verstat(UnsafeRawBufferPointer($0)) }
    }

    /// Case-insensitive: the value is a token, and carriers differ in case.
    private static func equal(_ bytes: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
        guard bytes.count == literal.utf8CodeUnitCount else { return false }
        let p = literal.utf8Start
        for i in 0..<bytes.count where bytes[i] | 0x20 != p[i] | 0x20 { return false }
        return true
    }

    public var text: String {
        switch self {
        case .absent: return "absent"
        case .passed: return "TN-Validation-Passed"
        case .failed: return "TN-Validation-Failed"
        case .noValidation: return "No-TN-Validation"
        case .other: return "other"
        }
    }
}

/// Caller numbers that skip screening altogether: emergency services
/// calling back, internal extensions. An item is the digits as the caller
/// sends them (`110`, `1001`), a prefix of them (`8*`), or, with `+`, an
/// E.164 number or prefix (`+861012345678`, `+86108*`); an item without `+`
/// that is a complete number under the numbering plan also matches that
/// number however it is written.
public struct BypassList: Sendable, Equatable {
    var dialled: Set<DialledDigits> = []
    var dialledPrefixes: [DialledDigits] = []
    var numbers: Set<UInt64> = []
    var prefixes: [NumberPrefix] = []
    /// As configured, for messages.
    public private(set) var items: [String] = []

    public init() {}

    public var isEmpty: Bool { items.isEmpty }

    /// Why `item` is not written as a bypass item, if it is not (whether
    /// a `+` item is a valid E.164 number depends on the numbering plan:
    /// `add` checks that).
    public static func syntaxProblem(_ item: String) -> String? {
        digits(of: item, normalizer: NumberNormalizer()) == nil
            ? "'\(item)' is not a number or a number prefix (digits, optionally with + and a trailing *)" : nil
    }

    private static func digits(of item: String, normalizer: NumberNormalizer) -> DialledDigits? {
        var text = item
        if text.hasSuffix("*") { text.removeLast() }
        guard !text.contains(":"), !text.contains("@") else { return nil }
        let digits: DialledDigits? = text.withUTF8 { normalizer.dialledDigits(bytes: UnsafeRawBufferPointer($0)) }
        guard let digits, digits.count >= 1 else { return nil }
        return digits
    }

    /// Adds one item; the reason it is not one, if it is not.
    public mutating func add(_ item: String, normalizer: NumberNormalizer) -> String? {
        if let problem = BypassList.syntaxProblem(item) { return problem }
        var text = item
        let isPrefix = text.hasSuffix("*")
        if isPrefix { text.removeLast() }
        guard let digits = BypassList.digits(of: item, normalizer: normalizer) else { return BypassList.syntaxProblem(item) }
        if isPrefix {
            if digits.plus {
                guard case .success(.prefix(let p)) = normalizer.pattern(item) else { return "'\(item)' is not a valid E.164 prefix" }
                prefixes.append(p)
            } else {
                dialledPrefixes.append(digits)
            }
        } else {
            if !digits.plus { dialled.insert(digits) }
            switch normalizer.normalize(text) {
            case .number(let n), .notInPlan(let n, _): numbers.insert(n.value)
            case .invalid(let reason) where digits.plus: return "'\(item)' is not an E.164 number: \(reason)"
            default: break
            }
        }
        items.append(item)
        return nil
    }

    func matches(dialled caller: DialledDigits?, number: PhoneNumber?) -> Bool {
        if let caller, !caller.plus {
            if dialled.contains(caller) { return true }
            for p in dialledPrefixes where caller.hasPrefix(p) { return true }
        }
        if let number {
            if numbers.contains(number.value) { return true }
            for p in prefixes where p.covers(number) { return true }
        }
        return false
    }
}

/// Every caller policy, as configured. The defaults change nothing:
/// withheld and invalid callers and every verification result are allowed.
public struct CallerPolicies: Sendable, Equatable {
    public var anonymous = PolicySetting()
    public var invalid = PolicySetting()
    public var verstatFailed = PolicySetting()
    public var verstatNoValidation = PolicySetting()
    /// `verstat-failed-contacts = ignore`: a contact match does not count
    /// for a caller whose validation failed (its number may be spoofed).
    public var distrustContactsOnFailedValidation = false
    public var bypass = BypassList()
    /// `unknown-label = attribution`: unknown callers are labelled with the attribution of
    /// their number (region and carrier), when `attribution` is on and the data names one.
    public var unknownLabel = UnknownLabel.none

    public init() {}

    static let defaultLabels: [PolicyRule: String] = [
        .anonymous: "Anonymous", .invalid: "Invalid Number", .verstatFailed: "Unverified", .verstatNoValidation: "Unverified",
    ]

    /// The label a `label` action shows when the configuration names none.
    public static func defaultLabel(_ rule: PolicyRule) -> String { defaultLabels[rule] ?? "Screened" }

    func setting(_ rule: PolicyRule) -> PolicySetting? {
        switch rule {
        case .anonymous: return anonymous
        case .invalid: return invalid
        case .verstatFailed: return verstatFailed
        case .verstatNoValidation: return verstatNoValidation
        case .bypass, .contactDistrusted: return nil
        }
    }

    var usesTime: Bool {
        [anonymous, invalid, verstatFailed, verstatNoValidation].contains { $0.active != nil }
    }
}

/// The label an unknown caller gets (`unknown-label`).
public enum UnknownLabel: String, Sendable, Equatable, CaseIterable {
    /// None: unknown callers pass without a label.
    case none
    /// The attribution of the number (`attribution = LANG`).
    case attribution
}

/// What screening knows about a call besides the caller's identity.
/// Built per request on the hot path: no storage of its own.
public struct CallContext {
    /// The callee: the Request-URI user part (%-decoded; anything from the
    /// first `;` on is ignored). Empty when unknown.
    public var callee: UnsafeRawBufferPointer
    /// `verstat` of the caller's URI.
    public var verstat: Verstat
    /// `Privacy: id` (RFC 3325): the callee must not learn who calls.
    public var privacy: Bool
    /// Now, in the configured time zone; nil counts as inside every window.
    public var time: LocalTime?

    public init(callee: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0), verstat: Verstat = .absent,
                privacy: Bool = false, time: LocalTime? = nil) {
        self.callee = callee
        self.verstat = verstat
        self.privacy = privacy
        self.time = time
    }
}
