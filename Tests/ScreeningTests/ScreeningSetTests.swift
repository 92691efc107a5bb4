import Foundation
import XCTest
@testable import Directory
import Identity
@testable import Screening

/// The decision chain: contacts, then directories in priority order.
final class ScreeningSetTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder() }
    override func tearDown() { folder.cleanup() }

    /// A readable summary of a decision: verdict, number, label, source, match.
    func summary(_ set: ScreeningSet, _ identity: String) -> String {
        let d = set.decide(identity: identity)
        return [
            d.verdict.rawValue,
            d.number?.description ?? "-",
            d.label.map { set.label($0) } ?? "-",
            d.source.map { set.sourceName($0) } ?? "-",
            d.match?.description ?? "-",
        ].joined(separator: " | ")
    }

    /// Tests/Fixtures/priority: two directories that disagree (DaemonTests' priority test
    /// serves the same two through the daemon).
    func twoDirectories() throws -> ScreeningSet {
        let fixtures = fixturesDirectory.appendingPathComponent("priority")
        let high = try compileDirectory(try String(contentsOf: fixtures.appendingPathComponent("high.csv"), encoding: .utf8),
                                        named: "high.lkd", in: folder)
        let low = try compileDirectory(try String(contentsOf: fixtures.appendingPathComponent("low.csv"), encoding: .utf8),
                                       named: "low.lkd", in: folder)
        return ScreeningSet(normalizer: NumberNormalizer(), contacts: [],
                            directories: [ScreeningDirectory(name: "high", file: high), ScreeningDirectory(name: "low", file: low)])
    }

    func testBlockedIfAnyDirectoryBlocksLabelFromTheHighestIdentifying() throws {
        let set = try twoDirectories()
        // The higher one identifies, the lower one blocks: blocked, the higher one's label, the lower one as source.
        XCTAssertEqual(summary(set, "+8613800000001"), "blocked | +8613800000001 | Bank A | low | +8613800000001")
        // The higher one blocks without a label, the lower one identifies.
        XCTAssertEqual(summary(set, "+8613800000002"), "blocked | +8613800000002 | Debt Collector B | high | +8613800000002")
        // Both identify: the higher one wins.
        XCTAssertEqual(summary(set, "+8613800000003"), "identified | +8613800000003 | Shop A | high | +8613800000003")
        // Only the lower one knows it.
        XCTAssertEqual(summary(set, "+8613800000004"), "identified | +8613800000004 | Only B | low | +8613800000004")
        // Both block: the higher one is the source, and its label.
        XCTAssertEqual(summary(set, "+8613800000005"), "blocked | +8613800000005 | Spam A | high | +8613800000005")
        // A prefix rule in the higher one, an exact block in the lower one.
        XCTAssertEqual(summary(set, "+8617012345678"), "blocked | +8617012345678 | Virtual Operator | low | +8617012345678")
        XCTAssertEqual(summary(set, "+8617099999999"), "identified | +8617099999999 | Virtual Operator | high | +86170*")
        // The lower one's exact block beats its own prefix label: no label at all.
        XCTAssertEqual(summary(set, "+8613800000006"), "blocked | +8613800000006 | - | low | +8613800000006")
        // The higher one's exact label, the lower one's prefix label is not needed.
        XCTAssertEqual(summary(set, "+8613800000007"), "identified | +8613800000007 | Courier A | high | +8613800000007")
        XCTAssertEqual(summary(set, "+8613800000009"), "identified | +8613800000009 | Range B | low | +861380000000*")
        XCTAssertEqual(summary(set, "+8613900000000"), "unknown | +8613900000000 | - | - | -")
    }

    func testDecisionFieldsAndSources() throws {
        let set = try twoDirectories()
        let d = set.decide(identity: "013800000001")
        XCTAssertEqual(d.verdict, .blocked)
        XCTAssertEqual(d.number, number("+8613800000001"))
        XCTAssertEqual(d.source, .directory(1))
        XCTAssertEqual(d.match, .exact(number("+8613800000001")))
        guard case .directory(index: 0, label: _)? = d.label else { return XCTFail("label should come from directory 0: \(String(describing: d.label))") }
        XCTAssertNil(d.invalidReason)
        XCTAssertEqual(set.decide(identity: "+8613900000000"), Decision(verdict: .unknown, number: number("+8613900000000")))
    }

    func testReversingThePriorityOrderChangesTheLabel() throws {
        let set = try twoDirectories()
        let reversed = ScreeningSet(normalizer: set.normalizer, contacts: [], directories: set.directories.reversed())
        XCTAssertEqual(summary(reversed, "+8613800000001"), "blocked | +8613800000001 | Spam B | low | +8613800000001")
        XCTAssertEqual(summary(reversed, "+8613800000003"), "identified | +8613800000003 | Shop B | low | +8613800000003")
    }

    func testContactsOverrideABlock() throws {
        let directory = try compileDirectory("""
        number,action,label
        +8613911112222,block,Telemarketing
        +86170*,block,Virtual Operator Range
        """, named: "dir.lkd", in: folder)
        let contacts = try parseContacts("name,number\nMum,139 1111 2222\nCarrier Friend,+86 170 1234 5678\n", name: "friends.csv", format: .csv)
        XCTAssertEqual(contacts.warnings, [])
        let set = ScreeningSet(normalizer: NumberNormalizer(), contacts: [contacts.list],
                               directories: [ScreeningDirectory(name: "dir", file: directory)])
        XCTAssertEqual(summary(set, "+8613911112222"), "contact | +8613911112222 | Mum | friends.csv | +8613911112222")
        XCTAssertEqual(summary(set, "+86 170 1234 5678"), "contact | +8617012345678 | Carrier Friend | friends.csv | +8617012345678")
        XCTAssertEqual(summary(set, "+8617012345679"), "blocked | +8617012345679 | Virtual Operator Range | dir | +86170*")
        let d = set.decide(identity: "+8613911112222")
        XCTAssertEqual(d.verdict, .contact)
        XCTAssertEqual(d.source, .contacts(0))
    }

    func testFirstContactsListWins() throws {
        let a = try parseContacts("name,number\nAlice,+8613800000001\n", name: "a.csv", format: .csv).list
        let b = try parseContacts("name,number\nBob,+8613800000001\nCarol,+8613800000002\n", name: "b.csv", format: .csv).list
        let set = ScreeningSet(normalizer: NumberNormalizer(), contacts: [a, b], directories: [])
        XCTAssertEqual(summary(set, "+8613800000001"), "contact | +8613800000001 | Alice | a.csv | +8613800000001")
        XCTAssertEqual(summary(set, "+8613800000002"), "contact | +8613800000002 | Carol | b.csv | +8613800000002")
        XCTAssertEqual(set.decide(identity: "+8613800000002").source, .contacts(1))
    }

    func testAnonymousAndInvalidCallers() throws {
        let set = try twoDirectories()
        for identity in ["anonymous", "anonymous.invalid", "restricted"] {
            XCTAssertEqual(set.decide(identity: identity), Decision(verdict: .anonymous), identity)
        }
        // An identity without a number (a URI with no user part) is withheld.
        XCTAssertEqual(set.decide(caller: CallerIdentity(scheme: .sip, number: nil), context: CallContext()), Decision(verdict: .anonymous))
        // No number at all is an invalid caller number (the invalid-callers policy), not a withheld one.
        XCTAssertEqual(set.decide(identity: ""), Decision(verdict: .invalid, invalidReason: .empty))
        XCTAssertEqual(set.decide(identity: "abc"), Decision(verdict: .invalid, invalidReason: .letters))
        guard case .invalid(let short) = NumberNormalizer().normalize("1001") else { return XCTFail("1001 is a number?") }
        XCTAssertEqual(set.decide(identity: "1001"), Decision(verdict: .invalid, invalidReason: short))
        XCTAssertEqual(set.decide(identity: "*86"), Decision(verdict: .invalid, invalidReason: .badCharacter("*")))
        XCTAssertEqual(set.decide(.anonymous), Decision(verdict: .anonymous))
    }

    func testByteAndTextEntryPointsAgree() throws {
        let set = try twoDirectories()
        for identity in ["+8613800000001", "013800000002", "anonymous", "abc", "+8617099999999", "+8613900000000"] {
            let viaBytes = Array(identity.utf8).withUnsafeBytes { set.decide(identity: $0) }
            XCTAssertEqual(viaBytes, set.decide(identity: identity), identity)
        }
    }

    func testUsesTheSetsNumberingPlan() throws {
        let us = try NumberingPlan(region: "US")
        let directory = try compileDirectory("number,action,label\n(212) 555-0100,identify,NY Office\n", named: "us.lkd", in: folder, plan: us)
        let set = ScreeningSet(normalizer: NumberNormalizer(plan: us), contacts: [],
                               directories: [ScreeningDirectory(name: "us", file: directory)])
        XCTAssertEqual(summary(set, "1-212-555-0100"), "identified | +12125550100 | NY Office | us | +12125550100")
        XCTAssertEqual(summary(set, "2125550100"), "identified | +12125550100 | NY Office | us | +12125550100")
    }

    func testManyThreadsDecideConcurrently() throws {
        let set = try twoDirectories()
        let expected = summary(set, "+8613800000001")
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<2_000 {
                let d = set.decide(identity: "+8613800000001")
                precondition(d.verdict == .blocked)
            }
        }
        XCTAssertEqual(summary(set, "+8613800000001"), expected)
    }
}
