import Directory
import Glibc
import Screening
import TextFormats
import TextRules

/// The value of a replicated change in etcd (docs/CLUSTER.md, "Keys and
/// values"): a JSON object such as
///
///     {"v":1,"action":"block","label":"Fraud","origin":"node-a","time":"2025-06-01T10:00:00.123Z"}
///
/// under the key `PREFIX/DIRECTORY/NUMBER`. A reader ignores members it does
/// not know, unless the value names them in `crit` (as JWS does, RFC 7515
/// §4.1.11): a writer that adds a member which changes what a value means
/// (an expiry) lists it there, and a reader that does not implement it
/// refuses the value instead of applying half of it. A refused value counts
/// as absent on that node, is logged and counted as an apply error, and is
/// kept so that an upgraded node applies it.
public struct ReplicatedValue: Equatable, Sendable {
    public enum Action: String, Sendable, CaseIterable {
        case block, identify, remove
        /// Lower-priority directories do not block the number; an older lookupd refuses
        /// the value (an action it does not know), so no node takes it for another.
        case allow
    }

    /// Value format version this lookupd writes and reads.
    public static let version = 1
    /// Members this lookupd implements (what `crit` may name).
    static let understood: Set<String> = ["v", "crit", "action", "label", "origin", "time"]
    /// Largest value read: a label is at most 255 bytes; the rest is slack
    /// for members added later.
    public static let maxSize = ReplicaFormat.maxTextBytes

    public var action: Action
    public var label: [UInt8]?
    public var origin: String
    /// Milliseconds since 1970 (UTC) when the change was made.
    public var time: Int64

    public init(action: Action, label: [UInt8]?, origin: String, time: Int64) {
        self.action = action
        self.label = label
        self.origin = origin
        self.time = time
    }

    /// The change `lookupd add` makes: block (with or without a label), identify or allow.
    public init(blocked: Bool, label: [UInt8]?, origin: String, time: Int64, allowed: Bool = false) {
        self.init(action: allowed ? .allow : blocked ? .block : .identify, label: label, origin: origin, time: time)
    }

    public var json: String {
        var members: [(key: String, value: JSONValue)] = [("v", .number(String(Self.version))), ("action", .string(action.rawValue))]
        if let label { members.append(("label", .string(String(decoding: label, as: UTF8.self)))) }
        members.append(("origin", .string(origin)))
        members.append(("time", .string(ReplicatedValue.formatTime(time))))
        return JSONValue.object(members).description
    }

    /// What the layer records for this value.
    public func entry(revision: UInt64) -> ReplicaEntry {
        let action: ReplicaAction
        switch self.action {
        case .block: action = .add(blocked: true, label: label)
        case .identify: action = .add(blocked: false, label: label)
        case .allow: action = .add(blocked: false, label: label, allowed: true)
        case .remove: action = .remove
        }
        return ReplicaEntry(revision: revision, action: action, time: time, origin: Array(origin.utf8))
    }

    /// Reads a value. Anything this lookupd cannot apply as written is an
    /// error naming why (the caller records the value as refused).
    public static func parse(_ bytes: [UInt8]) -> Result<ReplicatedValue, ValueProblem> {
        guard bytes.count <= maxSize else { return .failure(ValueProblem("value is \(bytes.count) bytes, more than \(maxSize)")) }
        let json: JSONValue
        do { json = try JSONValue.parse(bytes, maxDepth: 8) } catch { return .failure(ValueProblem("not JSON: \(error)")) }
        guard json.objectMembers != nil else { return .failure(ValueProblem("not a JSON object")) }
        if let v = json["v"] {
            guard let n = v.int64Value, n >= 1 else { return .failure(ValueProblem("'v' is not a format version")) }
            guard n <= Int64(version) else {
                return .failure(ValueProblem("format version \(n); this lookupd reads version \(version)"))
            }
        }
        if let crit = json["crit"] {
            guard let names = crit.arrayValue, names.allSatisfy({ $0.stringValue != nil }) else {
                return .failure(ValueProblem("'crit' is not a list of member names"))
            }
            for name in names.compactMap(\.stringValue) where !understood.contains(name) {
                return .failure(ValueProblem("critical member '\(DirectoryCompiler.printable(name))' is not known to this lookupd"))
            }
        }
        guard let text = json["action"]?.stringValue else { return .failure(ValueProblem("no 'action'")) }
        guard let action = Action(rawValue: text) else {
            return .failure(ValueProblem("action '\(DirectoryCompiler.printable(text))' is not known to this lookupd (it knows \(Action.allCases.map(\.rawValue).joined(separator: ", ")))"))
        }
        var label: [UInt8]? = nil
        if let member = json["label"], !member.isNull {
            guard let text = member.stringValue else { return .failure(ValueProblem("'label' is not a string")) }
            if let problem = LabelRules.problem(text) { return .failure(ValueProblem("bad label: \(problem)")) }
            label = Array(text.utf8)
        }
        switch action {
        case .identify where label == nil: return .failure(ValueProblem("identify without a label"))
        case .remove where label != nil: return .failure(ValueProblem("remove with a label"))
        default: break
        }
        // Informational members: a malformed one is left out, never refused.
        var origin = json["origin"]?.stringValue ?? ""
        if origin.utf8.count > ReplicaFormat.maxOriginBytes || !origin.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F }) { origin = "" }
        let time = json["time"]?.stringValue.flatMap(parseTime) ?? 0
        return .success(ReplicatedValue(action: action, label: label, origin: origin, time: time))
    }

    /// The entry for an etcd value at `revision`: the value applied, or
    /// kept as refused with the reason.
    public static func entry(_ bytes: [UInt8], revision: UInt64) -> (entry: ReplicaEntry, problem: ValueProblem?) {
        switch parse(bytes) {
        case .success(let value): return (value.entry(revision: revision), nil)
        case .failure(let problem):
            return (ReplicaEntry(revision: revision, action: .refused(value: Array(bytes.prefix(maxSize)))), problem)
        }
    }

    public struct ValueProblem: Error, Equatable, Sendable, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    // MARK: - Time

    /// `2025-06-01T10:00:00.123Z` (RFC 3339, UTC, milliseconds).
    public static func formatTime(_ milliseconds: Int64) -> String {
        let ms = Int(milliseconds % 1000)
        let fraction = ms < 10 ? "00\(ms)" : ms < 100 ? "0\(ms)" : "\(ms)"
        return UTCTime(seconds: milliseconds / 1000).text + ".\(fraction)Z"
    }

    /// Milliseconds since 1970 for `YYYY-MM-DDTHH:MM:SS[.fraction]Z`; nil otherwise.
    static func parseTime(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count >= 20, b.last == UInt8(ascii: "Z"), b[4] == 0x2D, b[7] == 0x2D, b[10] == UInt8(ascii: "T"), b[13] == 0x3A, b[16] == 0x3A else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var n: Int32 = 0
            for i in range {
                guard b[i] >= 0x30, b[i] <= 0x39 else { return nil }
                n = n * 10 + Int32(b[i] - 0x30)
            }
            return n
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var ms: Int64 = 0
        if b.count > 20 {
            guard b[19] == 0x2E, b.count > 21 else { return nil }
            var scale: Int64 = 100
            for i in 20..<(b.count - 1) {
                guard b[i] >= 0x30, b[i] <= 0x39 else { return nil }
                ms += Int64(b[i] - 0x30) * scale
                scale /= 10
            }
        } else if b[19] != UInt8(ascii: "Z") {
            return nil
        }
        return UTCTime.seconds(year: Int64(year), month: Int(month), day: Int(day), hour: Int(hour), minute: Int(minute), second: Int(second)) * 1000 + ms
    }

    /// Now, in milliseconds since 1970.
    public static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}

/// The etcd keys of replicated directories.
public enum ReplicatedKeys {
    /// `PREFIX/DIRECTORY/+8613800138000`, `PREFIX/DIRECTORY/+86170*`.
    public static func key(_ directoryPrefix: String, _ pattern: NumberPattern) -> String {
        directoryPrefix + pattern.description
    }

    /// The number or prefix rule a key under `directoryPrefix` names; nil
    /// unless it is exactly the canonical form `key(_:_:)` writes.
    public static func pattern(_ key: [UInt8], directoryPrefix: [UInt8]) -> NumberPattern? {
        guard key.count > directoryPrefix.count, key.starts(with: directoryPrefix) else { return nil }
        var rest = key[directoryPrefix.count...]
        guard rest.first == UInt8(ascii: "+") else { return nil }
        rest = rest.dropFirst()
        var isPrefix = false
        if rest.last == UInt8(ascii: "*") { isPrefix = true; rest = rest.dropLast() }
        guard !rest.isEmpty, rest.count <= PhoneNumber.maxDigits, rest.first != UInt8(ascii: "0"),
              rest.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        let digits = rest.reduce(UInt64(0)) { $0 * 10 + UInt64($1 - 0x30) }
        if isPrefix { return NumberPrefix(digits: digits, length: rest.count).map { .prefix($0) } }
        return PhoneNumber(value: digits).map { .exact($0) }
    }

    /// The end of etcd's range of every key starting with `prefix` (its
    /// last byte incremented, as etcd's own clients compute it).
    public static func rangeEnd(_ prefix: [UInt8]) -> [UInt8] {
        var end = prefix
        while let last = end.last {
            if last < 0xFF {
                end[end.count - 1] = last + 1
                return end
            }
            end.removeLast()
        }
        return [0]
    }
}
