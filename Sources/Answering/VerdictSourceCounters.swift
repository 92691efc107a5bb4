import Screening

/// Verdicts by the source that decided them. A directory is counted by its
/// position in the configuration and named at scrape time, so a reload
/// that reorders directories carries a position's count over to the
/// directory now in that place (Prometheus sees a counter that may jump;
/// restarts have the same effect).
///
/// Threading: one writer thread (its worker), any number of readers.
public final class VerdictSourceCounters: @unchecked Sendable {
    public static let directorySlots = 64
    /// none, directories, more directories, contacts, callee contacts, one per policy rule,
    /// callee block lists (last, so the other slots keep their places).
    public static let sourceSlots = 1 + directorySlots + 1 + 2 + PolicyRule.allCases.count + 1
    private let block = CounterBlock(count: Verdict.allCases.count * VerdictSourceCounters.sourceSlots)
    public init() {}

    private static let verdictIndex: [Verdict: Int] = Dictionary(uniqueKeysWithValues: Verdict.allCases.enumerated().map { ($1, $0) })

    @inline(__always)
    func add(_ decision: Decision) {
        let v = VerdictSourceCounters.index(decision.verdict)
        block.add(v * VerdictSourceCounters.sourceSlots + VerdictSourceCounters.slot(decision.source))
    }

    @inline(__always)
    static func index(_ verdict: Verdict) -> Int {
        switch verdict {
        case .blocked: return 0
        case .identified: return 1
        case .contact: return 2
        case .unknown: return 3
        case .anonymous: return 4
        case .invalid: return 5
        case .bypassed: return 6
        }
    }

    static func slot(_ source: DecisionSource?) -> Int {
        switch source {
        case nil: return 0
        case .directory(let i)?: return 1 + min(i, directorySlots)
        case .contacts?: return 2 + directorySlots
        case .calleeContacts?: return 3 + directorySlots
        case .policy(let rule)?: return 4 + directorySlots + PolicyRule.allCases.firstIndex(of: rule)!
        case .calleeBlocks?: return sourceSlots - 1
        }
    }

    public func value(verdict: Verdict, slot: Int) -> UInt64 {
        block.value(VerdictSourceCounters.index(verdict) * VerdictSourceCounters.sourceSlots + slot)
    }

    /// The label value for a slot, with the directory names of `set`.
    public static func sourceName(_ slot: Int, set: ScreeningSet) -> String? {
        switch slot {
        case 0: return "none"
        case 1...directorySlots:
            let i = slot - 1
            return i < set.directories.count ? set.directories[i].name : nil
        case 1 + directorySlots: return set.directories.count > directorySlots ? "other-directories" : nil
        case 2 + directorySlots: return "contacts"
        case 3 + directorySlots: return "callee-contacts"
        case sourceSlots - 1: return "callee-blocks"
        default: return "policy:" + PolicyRule.allCases[slot - 4 - directorySlots].rawValue
        }
    }
}
