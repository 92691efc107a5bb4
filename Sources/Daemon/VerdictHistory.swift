import Answering
import Glibc
import Screening

/// Calls per verdict in each wall-clock minute of the last hour, for the
/// status page's chart.
///
/// Sampled, not counted: the HTTP thread sums the workers' verdict counters
/// once a second (and again before it answers `/status.json`) and charges
/// what they gained since the last sample to the current minute. The
/// answering threads do nothing for it; a call is charged to the minute in
/// which the sampler saw it, at most a second late. The counters start at
/// zero with the daemon, so the history covers exactly the calls since start.
///
/// Threading: `sample` and `minutes` from any thread (one lock).
final class VerdictHistory: Sendable {
    /// Whole minutes kept before the current one: with it, an hour.
    static let closedMinutes = 59

    struct Minute: Equatable {
        /// Unix time of the minute's first second.
        var start: Int
        /// Per verdict, in `Verdict.allCases` order.
        var counts: [UInt64]
    }

    private struct State {
        var closed: [Minute] = []
        var current: Minute?
        var lastTotals = [UInt64](repeating: 0, count: Verdict.allCases.count)
    }

    private let state = Locked(State())

    /// Charges what `totals` (cumulative counts per verdict, `Verdict.allCases`
    /// order) gained since the last sample to the minute holding `now` (Unix seconds).
    func sample(totals: [UInt64], now: Int) {
        let minute = now - ((now % 60) + 60) % 60
        state.withLock { s in
            var gained = [UInt64](repeating: 0, count: totals.count)
            for i in totals.indices where i < s.lastTotals.count {
                gained[i] = totals[i] >= s.lastTotals[i] ? totals[i] - s.lastTotals[i] : 0
            }
            s.lastTotals = totals
            var current = s.current ?? Minute(start: minute, counts: [UInt64](repeating: 0, count: totals.count))
            // A clock stepped back keeps charging the minute in hand: the chart never runs backwards.
            if minute > current.start {
                s.closed.append(current)
                // Minutes without a sample (a suspended machine, a clock stepped forward) are
                // empty; only the last hour's worth is filled in.
                var gap = max(current.start + 60, minute - 60 * VerdictHistory.closedMinutes)
                while gap < minute {
                    s.closed.append(Minute(start: gap, counts: [UInt64](repeating: 0, count: totals.count)))
                    gap += 60
                }
                if s.closed.count > VerdictHistory.closedMinutes { s.closed.removeFirst(s.closed.count - VerdictHistory.closedMinutes) }
                current = Minute(start: minute, counts: [UInt64](repeating: 0, count: totals.count))
            }
            for i in gained.indices { current.counts[i] += gained[i] }
            s.current = current
        }
    }

    /// The last hour: the closed minutes and the current one, oldest first.
    var minutes: [Minute] {
        state.withLock { s in s.current.map { s.closed + [$0] } ?? [] }
    }
}

extension Worker {
    /// The workers' verdict counters summed, in `Verdict.allCases` order.
    static func verdictTotals(_ workers: [Worker]) -> [UInt64] {
        Verdict.allCases.map { verdict in
            workers.reduce(UInt64(0)) { $0 + $1.counters.value(Counter.verdict(verdict)) }
        }
    }
}
