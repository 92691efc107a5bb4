import Glibc
import Synchronization

/// The calls of this layer a test can make fail.
public enum SystemCall: String, CaseIterable, Sendable {
    case open, read, write, fstat, stat, fsync, rename, unlink, link, mkdir, ftruncate, fallocate, mmap, msync, flock
    case copyFileRange = "copy_file_range"
}

/// The test hook of the system-call layer: makes chosen calls fail with a chosen errno, so
/// tests can show what every writer does on a full disk (ENOSPC), a failing one (EIO) or an
/// interrupted call (EINTR, which the layer must retry) without a broken disk.
///
/// Rules are set in-process (`inject`), or for a spawned `lookupd` through the environment:
///
///     LOOKUPD_TEST_FAULTS='fsync:EIO:path=.lkd,write:ENOSPC:skip=2:times=1'
///
/// one rule per comma-separated item: the call, the errno name, then optional `path=TEXT`
/// (only calls on a path containing TEXT), `skip=N` (let N matching calls through first) and
/// `times=N` (fail N times, then let calls through; default: always).
///
/// Without rules the check is one relaxed atomic load per call. Threading: any thread.
public enum SystemCallFaults {
    public struct Rule: Sendable, Hashable {
        public var call: SystemCall
        public var errno: Errno
        public var pathContains: String?
        public var skip: Int
        public var times: Int

        public init(_ call: SystemCall, _ errno: Errno, pathContains: String? = nil, skip: Int = 0, times: Int = .max) {
            self.call = call
            self.errno = errno
            self.pathContains = pathContains
            self.skip = skip
            self.times = times
        }
    }

    private struct Armed {
        var rules: [Rule]
        var seen: [Int]
        var fired: [Int]
    }

    private static let environmentVariable = "LOOKUPD_TEST_FAULTS"
    private static let state = Locked(Armed(rules: fromEnvironment, seen: [], fired: []))
    private static let armed = Atomic<Bool>(!fromEnvironment.isEmpty)

    private static var fromEnvironment: [Rule] {
        guard let raw = getenv(environmentVariable) else { return [] }
        return parse(String(cString: raw)) ?? []
    }

    /// Replaces the rules in force (an empty list disarms the hook).
    public static func inject(_ rules: [Rule]) {
        state.withLock { $0 = Armed(rules: rules, seen: Array(repeating: 0, count: rules.count), fired: Array(repeating: 0, count: rules.count)) }
        armed.store(!rules.isEmpty, ordering: .relaxed)
    }

    public static func clear() { inject([]) }

    /// How many times each rule made a call fail since it was injected.
    public static var fired: [Int] { state.withLock { $0.fired } }

    /// `text` as rules (the environment syntax); nil when an item cannot be read.
    public static func parse(_ text: String) -> [Rule]? {
        var rules: [Rule] = []
        for item in text.split(separator: ",") {
            let fields = item.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard fields.count >= 2, let call = SystemCall(rawValue: fields[0]), let errno = Errno(name: fields[1]) else { return nil }
            var rule = Rule(call, errno)
            for option in fields.dropFirst(2) {
                guard let eq = option.firstIndex(of: "=") else { return nil }
                let key = option[..<eq], value = String(option[option.index(after: eq)...])
                switch key {
                case "path": rule.pathContains = value
                case "skip": guard let n = Int(value), n >= 0 else { return nil }; rule.skip = n
                case "times": guard let n = Int(value), n >= 0 else { return nil }; rule.times = n
                default: return nil
                }
            }
            rules.append(rule)
        }
        return rules
    }

    /// The errno `call` on `path` must fail with now, if a rule says so.
    @inline(__always)
    static func fault(_ call: SystemCall, _ path: String?) -> Errno? {
        guard armed.load(ordering: .relaxed) else { return nil }
        return slowFault(call, path)
    }

    private static func slowFault(_ call: SystemCall, _ path: String?) -> Errno? {
        state.withLock { s in
            if s.seen.count < s.rules.count {
                s.seen = Array(repeating: 0, count: s.rules.count)
                s.fired = Array(repeating: 0, count: s.rules.count)
            }
            for (i, rule) in s.rules.enumerated() where rule.call == call {
                if let needle = rule.pathContains {
                    guard let path, path.contains(needle) else { continue }
                }
                s.seen[i] += 1
                if s.seen[i] <= rule.skip || s.fired[i] >= rule.times { continue }
                s.fired[i] += 1
                return rule.errno
            }
            return nil
        }
    }
}
