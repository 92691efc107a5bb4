@testable import Daemon
import Foundation
import XCTest

/// The status page's parts without a daemon: the per-minute ring, the ring
/// of recent log lines (the JSON writer: TextFormatsTests).
final class StatusPartsTests: XCTestCase {
    private func counts(_ history: VerdictHistory) -> [[UInt64]] { history.minutes.map(\.counts) }

    func testMinutesFollowTheWallClock() {
        let history = VerdictHistory()
        let t0 = 1_800_000_000 - 1_800_000_000 % 60   // a minute's first second
        XCTAssertEqual(history.minutes, [], "nothing before the first sample")
        history.sample(totals: [0, 0, 0, 0, 0, 0, 0], now: t0 + 5)
        history.sample(totals: [2, 1, 0, 0, 0, 0, 0], now: t0 + 30)
        history.sample(totals: [3, 1, 0, 1, 0, 0, 0], now: t0 + 59)
        XCTAssertEqual(history.minutes, [.init(start: t0, counts: [3, 1, 0, 1, 0, 0, 0])])
        // The next minute starts from what the counters had.
        history.sample(totals: [4, 1, 0, 1, 0, 0, 0], now: t0 + 61)
        XCTAssertEqual(history.minutes.map(\.start), [t0, t0 + 60])
        XCTAssertEqual(counts(history).last, [1, 0, 0, 0, 0, 0, 0])
        // Three minutes without a sample are empty minutes; what came meanwhile goes to the minute it was seen in.
        history.sample(totals: [10, 1, 0, 1, 0, 0, 0], now: t0 + 4 * 60 + 1)
        XCTAssertEqual(history.minutes.map(\.start), (0...4).map { t0 + 60 * $0 })
        XCTAssertEqual(counts(history), [[3, 1, 0, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0],
                                         [6, 0, 0, 0, 0, 0, 0]])
        // A clock stepped back keeps charging the minute in hand.
        history.sample(totals: [11, 1, 0, 1, 0, 0, 0], now: t0 + 10)
        XCTAssertEqual(history.minutes.last, .init(start: t0 + 4 * 60, counts: [7, 0, 0, 0, 0, 0, 0]))
        XCTAssertEqual(history.minutes.count, 5)
    }

    func testAnHourAtMost() {
        let history = VerdictHistory()
        let t0 = 1_800_000_000 - 1_800_000_000 % 60
        var total: UInt64 = 0
        for minute in 0..<200 {
            total += 1
            history.sample(totals: [total, 0, 0, 0, 0, 0, 0], now: t0 + 60 * minute + 7)
        }
        let minutes = history.minutes
        XCTAssertEqual(minutes.count, 60, "59 whole minutes and the current one")
        XCTAssertEqual(minutes.first?.start, t0 + 60 * 140)
        XCTAssertEqual(minutes.last?.start, t0 + 60 * 199)
        XCTAssertTrue(minutes.allSatisfy { $0.counts[0] == 1 })
        // A jump of a day: an hour of empty minutes, not a day's worth.
        history.sample(totals: [total + 5, 0, 0, 0, 0, 0, 0], now: t0 + 60 * 199 + 86_400)
        XCTAssertEqual(history.minutes.count, 60)
        XCTAssertEqual(history.minutes.map(\.counts[0]), [UInt64](repeating: 0, count: 59) + [5])
        let starts = history.minutes.map(\.start)
        XCTAssertTrue(zip(starts, starts.dropFirst()).allSatisfy { $1 - $0 == 60 }, "\(starts)")
    }

    func testRecentLinesKeepTheNewestFifty() {
        var ring = RecentLines()
        func add(_ text: String) { Array(text.utf8).withUnsafeBytes { ring.add($0) } }
        XCTAssertTrue(ring.newestFirst.isEmpty)
        for i in 0..<3 { add("line \(i)") }
        XCTAssertEqual(ring.newestFirst.map { String(decoding: $0, as: UTF8.self) }, ["line 2", "line 1", "line 0"])
        for i in 3..<123 { add(i == 100 ? String(repeating: "x", count: 5000) : "line \(i)") }
        let lines = ring.newestFirst.map { String(decoding: $0, as: UTF8.self) }
        XCTAssertEqual(lines.count, RecentLines.capacity)
        XCTAssertEqual(lines.first, "line 122")
        XCTAssertEqual(lines.last, "line 73")
        XCTAssertEqual(lines[22].count, 5000, "a long line whole")
        XCTAssertEqual(lines[21], "line 101", "a short line after it in the same buffer, without its tail")
    }
}
