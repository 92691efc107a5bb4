import Foundation
import XCTest

/// The shrink guard at values other than its default, and a label with a line break in a
/// feed (issue 23: both could break without any test noticing).
extension FeedUpdateTests {
    /// max-shrink=P refuses a list that lost more than P % of the installed entries, and
    /// only that: at 20, 100 → 80 (-20 %) and 80 → 64 (-20 %) are taken, 80 → 63 (-21 %) is
    /// not. (At 50 a percentage computed the wrong way round agrees with the right one.)
    /// 0 refuses any loss but takes a list of the same size; 100 switches the guard off.
    func testMaxShrinkIsThePercentageTheListMayLose() throws {
        let target = path("spam.lkd")
        server.publish("spam.csv", csvList(100))
        let twenty = try config(["spamco \(server.url("f/spam.csv")) into=\(target) max-shrink=20"])
        XCTAssertTrue(try update(twenty).succeeded, "\(errors)")

        server.publish("spam.csv", csvList(80))
        XCTAssertTrue(try update(twenty).succeeded, "-20 % at max-shrink=20: \(errors)")
        XCTAssertEqual(record("spamco")?.entries, 80)

        server.publish("spam.csv", csvList(63))
        XCTAssertEqual(try update(twenty).failed, ["spamco"], "-21 % at max-shrink=20")
        XCTAssertTrue(errors.last?.contains("shrank from 80 to 63 entries (-21%), more than max-shrink=20%") ?? false, "\(errors)")
        XCTAssertEqual(try entries(target).count, 80, "the installed list stays")

        server.publish("spam.csv", csvList(64))
        XCTAssertTrue(try update(twenty).succeeded, "-20 % of 80 at max-shrink=20: \(errors)")
        XCTAssertEqual(try entries(target).count, 64)

        let none = try config(["spamco \(server.url("f/spam.csv")) into=\(target) max-shrink=0"])
        server.publish("spam.csv", csvList(63))
        XCTAssertEqual(try update(none).failed, ["spamco"], "one entry fewer at max-shrink=0")
        XCTAssertTrue(errors.last?.contains("shrank from 64 to 63 entries (-1%), more than max-shrink=0%") ?? false, "\(errors)")
        server.publish("spam.csv", csvList(64, offset: 1000))
        XCTAssertTrue(try update(none).succeeded, "as many entries, other numbers, at max-shrink=0: \(errors)")

        let off = try config(["spamco \(server.url("f/spam.csv")) into=\(target) max-shrink=100"])
        server.publish("spam.csv", csvList(1))
        XCTAssertTrue(try update(off).succeeded, "max-shrink=100 takes any list: \(errors)")
        XCTAssertEqual(try entries(target).count, 1)
    }

    /// A label holding CR LF (a quoted CSV field) in a feed is refused with its file and
    /// line, like any invalid line: it never reaches a directory, hence never a header.
    func testALabelWithALineBreakRefusesTheFeed() throws {
        try assertRefused("spamco:spam2.csv:3:", url: server.url("f/spam2.csv")) {
            server.publish("spam2.csv", "number,action,label\n+8613800138000,block,Fine\n+8613800138001,identify,\"Evil\r\nX-Injected: 1\"\n")
        }
        XCTAssertFalse(errors.joined().contains("X-Injected: 1\n"), "the label is not echoed raw: \(errors)")
    }
}
