/// A key lookupd.conf accepts, with the text the manual shows for it.
///
/// Most keys are one of a few kinds (a number in a range, one of an enum's values, yes/no, a
/// path); the factories below make each of those one table row, so that a range and its
/// message cannot drift apart and the manual's syntax is derived from the values accepted.
public struct ConfigKey: Sendable {
    public let name: String
    public let syntax: String
    public let repeatable: Bool
    public let summary: String
    let apply: @Sendable (inout ConfigParser.State, String) throws(ConfigParser.ValueError) -> Void

    init(name: String, syntax: String, repeatable: Bool, summary: String,
         apply: @escaping @Sendable (inout ConfigParser.State, String) throws(ConfigParser.ValueError) -> Void) {
        self.name = name
        self.syntax = syntax
        self.repeatable = repeatable
        self.summary = summary
        self.apply = apply
    }

    typealias Field<T> = WritableKeyPath<ConfigParser.State, T> & Sendable

    /// A whole number in `range`; `unit` names it in the message (`expected seconds from 1 to 86400`).
    static func number(_ name: String, _ syntax: String, _ range: ClosedRange<Int>, unit: String = "a number",
                       _ field: Field<Int>, summary: String) -> ConfigKey {
        ConfigKey(name: name, syntax: syntax, repeatable: false, summary: summary) { s, v throws(ConfigParser.ValueError) in
            s[keyPath: field] = try ConfigParser.number(v, in: range, unit)
        }
    }

    /// One of an enum's raw values; the syntax lists them (`603 | 607 | 608 | 603+`).
    static func choice<T: CaseIterable & RawRepresentable>(_ name: String, _ field: Field<T>, summary: String) -> ConfigKey
    where T.RawValue == String {
        ConfigKey(name: name, syntax: T.allCases.map(\.rawValue).joined(separator: " | "), repeatable: false,
                  summary: summary) { s, v throws(ConfigParser.ValueError) in
            s[keyPath: field] = try ConfigParser.choice(v)
        }
    }

    /// Two words for true and false (`yes | no`, `trust | ignore`).
    static func flag(_ name: String, yes: String = "yes", no: String = "no", _ field: Field<Bool>, summary: String) -> ConfigKey {
        ConfigKey(name: name, syntax: "\(yes) | \(no)", repeatable: false, summary: summary) { s, v throws(ConfigParser.ValueError) in
            switch v {
            case yes: s[keyPath: field] = true
            case no: s[keyPath: field] = false
            default: throw ConfigParser.ValueError("expected \(yes) or \(no)")
            }
        }
    }

    /// A path, taken relative to the config file's folder.
    static func path(_ name: String, summary: String,
                     _ set: @escaping @Sendable (inout ConfigParser.State, String) -> Void) -> ConfigKey {
        ConfigKey(name: name, syntax: "PATH", repeatable: false, summary: summary) { s, v throws(ConfigParser.ValueError) in
            set(&s, s.resolve(try ConfigParser.path(v)))
        }
    }
}

/// The readers behind the key kinds, also used inside compound values (`feed = ...`).
extension ConfigParser {
    static func number(_ v: String, in range: ClosedRange<Int>, _ unit: String = "a number") throws(ValueError) -> Int {
        guard let n = Int(v), range.contains(n) else { throw ValueError("expected \(unit) from \(range.lowerBound) to \(range.upperBound)") }
        return n
    }

    static func choice<T: CaseIterable & RawRepresentable>(_ v: String) throws(ValueError) -> T where T.RawValue == String {
        guard let value = T(rawValue: v) else { throw ValueError("expected " + alternatives(T.self)) }
        return value
    }

    /// `603, 607, 608 or 603+`: an enum's values as a message lists them.
    static func alternatives<T: CaseIterable & RawRepresentable>(_: T.Type) -> String where T.RawValue == String {
        let names = T.allCases.map(\.rawValue)
        return names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " or " + names.last!
    }

    static func path(_ v: String) throws(ValueError) -> String {
        guard !v.isEmpty else { throw ValueError("expected a path") }
        return v
    }
}
