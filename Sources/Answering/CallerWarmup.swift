import Directory
import Screening
import SIP

/// Warms the directories for a receive batch before its datagrams are answered one by one:
/// the callers guessed from each INVITE (`SIPCallerHint`: From and P-Asserted-Identity in `+`
/// form) are looked up in every directory together (`ScreeningSet.prefetch`, 32 searches
/// interleaved), so each answer finds its search path in the cache instead of waiting on a
/// DRAM read per level of a large directory. Only the cache changes: every answer still comes
/// from the parsed message through the checked lookup, and the warm-up's reads of a file
/// served from disk are inside its SIGBUS guard like any other.
///
/// Threading: its owner's (a worker, a harness); the buffer is allocated once.
public final class CallerWarmup {
    /// Guesses kept per message: From and P-Asserted-Identity.
    public static let perMessage = 2
    private let hints: UnsafeMutablePointer<PhoneNumber>
    private let capacity: Int
    private var count = 0

    public init(messages: Int) {
        capacity = messages * Self.perMessage
        hints = .allocate(capacity: capacity)
    }

    deinit { hints.deallocate() }

    /// Adds the callers guessed from one received message.
    public func add(_ message: UnsafeRawBufferPointer) {
        SIPCallerHint.numbers(message, limit: Self.perMessage) { value in
            if count < capacity, let number = PhoneNumber(value: value) {
                hints[count] = number
                count += 1
            }
        }
    }

    /// Looks the callers added so far up in every directory of `set`, then forgets them.
    /// `everyDirectory`: the small ones too (the fuzz harness; a worker warms only those
    /// `ScreeningSet.warmedEntries` says pay).
    public func warm(_ set: ScreeningSet, everyDirectory: Bool = false) {
        if count > 0, everyDirectory || set.warmsBatches {
            set.prefetch(UnsafeBufferPointer(start: hints, count: count), atLeast: everyDirectory ? 0 : ScreeningSet.warmedEntries)
        }
        count = 0
    }
}
