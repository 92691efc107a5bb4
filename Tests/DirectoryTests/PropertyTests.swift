import XCTest
@testable import Directory

/// 200,000 random entries and 200,000 random non-members, with a few prefix
/// rules: every member found with its exact data, every non-member answered
/// by exactly the longest covering prefix rule (or nothing). Seeded, so a
/// failure reproduces.
final class PropertyTests: XCTestCase {
    static let seed: UInt64 = 0x10C4_0D00_2024_0001
    static let entryCount = 200_000
    static let labelPool = [
        "Fraud Risk", "Telemarketing", "Scam Likely", "Debt Collector", "Delivery", "Bank", "Hospital",
        "Pizza Palace, Haidian", "\"Quoted\" Co.", "北京市医院", "Ünïcödé GmbH", "🚕 Taxi", "#hash",
        String(repeating: "L", count: 255),
    ]

    /// A random valid E.164 number of 7 to 15 digits.
    static func randomNumber(_ rng: inout SeededRandom) -> UInt64 {
        let digits = Int.random(in: 7...15, using: &rng)
        var low: UInt64 = 1
        for _ in 1..<digits { low *= 10 }
        return UInt64.random(in: low..<(low * 10), using: &rng)
    }

    func testRandomDirectory() throws {
        var rng = SeededRandom(seed: Self.seed)
        let folder = TemporaryFolder("lookupd-property")
        defer { folder.cleanup() }

        // Prefix rules first, so some members can be placed under them.
        var rules: [UInt64: UInt32] = [:]   // prefix key -> value word
        var rulePrefixes: [NumberPrefix] = []
        let labels = Self.labelPool.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
        func randomValue() -> UInt32 {
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: return DirectoryFormat.encodeValue(blocked: true, label: nil)
            case 1: return DirectoryFormat.encodeValue(blocked: false, label: UInt32.random(in: 0..<UInt32(labels.count), using: &rng))
            default: return DirectoryFormat.encodeValue(blocked: true, label: UInt32.random(in: 0..<UInt32(labels.count), using: &rng))
            }
        }
        while rulePrefixes.count < 40 {
            let n = Self.randomNumber(&rng)
            let digits = PhoneNumber.digitCount(of: n)
            let length = Int.random(in: 1...min(digits, 9), using: &rng)
            var p = n
            for _ in 0..<(digits - length) { p /= 10 }
            let prefix = NumberPrefix(digits: p, length: length)!
            guard rules[DirectoryFormat.prefixKey(prefix)] == nil else { continue }
            rules[DirectoryFormat.prefixKey(prefix)] = randomValue()
            rulePrefixes.append(prefix)
        }
        // Nested rules: a longer rule under an existing one.
        for parent in rulePrefixes.prefix(10) where parent.length <= 12 {
            let child = NumberPrefix(digits: parent.digits * 1000 + UInt64.random(in: 0...999, using: &rng), length: parent.length + 3)!
            if rules[DirectoryFormat.prefixKey(child)] == nil {
                rules[DirectoryFormat.prefixKey(child)] = randomValue()
                rulePrefixes.append(child)
            }
        }

        var members: [UInt64: UInt32] = [:]
        members.reserveCapacity(Self.entryCount)
        while members.count < Self.entryCount {
            var n = Self.randomNumber(&rng)
            if Int.random(in: 0..<10, using: &rng) == 0 {
                // A tenth of the members sit under a prefix rule.
                let p = rulePrefixes.randomElement(using: &rng)!
                let extra = Int.random(in: 0...(15 - p.length), using: &rng)
                var tail: UInt64 = 1
                for _ in 0..<extra { tail *= 10 }
                n = p.digits * tail + UInt64.random(in: 0..<tail, using: &rng)
                if PhoneNumber.digitCount(of: n) < 7 { continue }
            }
            members[n] = randomValue()
        }

        var c = DirectoryContent()
        c.labels = labels
        c.exactKeys = members.keys.sorted()
        c.exactValues = c.exactKeys.map { members[$0]! }
        c.prefixKeys = rules.keys.sorted()
        c.prefixValues = c.prefixKeys.map { rules[$0]! }
        let path = folder.file("random.lkd")
        try DirectoryWriter.write(c, to: path)
        let directory = try DirectoryFile(path: path)
        XCTAssertNoThrow(try directory.verify())
        XCTAssertEqual(directory.count, Self.entryCount)
        XCTAssertEqual(directory.prefixRuleCount, rules.count)

        func expectLabel(_ value: UInt32) -> String? {
            value >> 1 == 0 ? nil : String(decoding: labels[Int(value >> 1) - 1], as: UTF8.self)
        }
        var failures = 0
        for (key, value) in zip(c.exactKeys, c.exactValues) {
            let entry = try directory.lookup(PhoneNumber(value: key)!)
            let ok = entry?.match == .exact(PhoneNumber(value: key)!) && entry?.blocked == (value & 1 == 1)
                && entry.flatMap { $0.label.map { directory.label($0) } } == expectLabel(value)
            if !ok {
                failures += 1
                if failures <= 10 { XCTFail("member +\(key): got \(String(describing: entry)), want value \(value) (seed \(Self.seed))") }
            }
        }

        // Non-members: the longest covering rule, found by brute force.
        func expectedRule(_ n: UInt64) -> (NumberPrefix, UInt32)? {
            let digits = PhoneNumber.digitCount(of: n)
            var p = n
            var length = digits
            while length >= 1 {
                if length <= 15, let prefix = NumberPrefix(digits: p, length: length),
                   let value = rules[DirectoryFormat.prefixKey(prefix)] {
                    return (prefix, value)
                }
                p /= 10
                length -= 1
            }
            return nil
        }
        var checked = 0
        var covered = 0
        while checked < Self.entryCount {
            var n = Self.randomNumber(&rng)
            if checked % 4 == 0 {
                // Neighbours of members are the likeliest to be found by mistake.
                n = c.exactKeys[Int.random(in: 0..<c.exactKeys.count, using: &rng)] &+ 1
            }
            guard members[n] == nil, PhoneNumber(value: n) != nil else { continue }
            checked += 1
            let entry = try directory.lookup(PhoneNumber(value: n)!)
            let expected = expectedRule(n)
            if expected != nil { covered += 1 }
            let ok: Bool
            if let (prefix, value) = expected {
                ok = entry?.match == .prefix(prefix) && entry?.blocked == (value & 1 == 1)
                    && entry.flatMap { $0.label.map { directory.label($0) } } == expectLabel(value)
            } else {
                ok = entry == nil
            }
            if !ok {
                failures += 1
                if failures <= 10 { XCTFail("non-member +\(n): got \(String(describing: entry)), want \(String(describing: expected)) (seed \(Self.seed))") }
            }
        }
        XCTAssertEqual(failures, 0)
        XCTAssertGreaterThan(covered, 0, "some non-members fall under a prefix rule")

        // Iteration gives back exactly what was written.
        var iterated = 0
        var previous: UInt64 = 0
        var ordered = true
        try directory.forEachEntry { entry in
            if case .exact(let number) = entry.match {
                if number.value <= previous { ordered = false }
                previous = number.value
                iterated += 1
            }
        }
        XCTAssertTrue(ordered)
        XCTAssertEqual(iterated, Self.entryCount)
    }
}
