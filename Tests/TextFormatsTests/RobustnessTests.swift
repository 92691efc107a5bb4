import XCTest
import TextFormats

/// Random byte mutations of valid inputs: every reader must either succeed
/// or throw a well-formed `TextFormatError`, never crash or throw anything
/// else. Every mutant goes through every reader, since feeding one format
/// to another's reader is also what operators do.
final class RobustnessTests: XCTestCase {
    static let seeds: [String] = [
        "number,action,label\n+8613800138000,block,\"Spam, \"\"Inc\"\"\"\n+8613900139000, allow ,\"multi\nline\"\r\n# c\n",
        "a;b;c\r\n\"x\";\"y\";\"z\"\r\n",
        "[\n  {\"number\": \"+8613800138000\", \"label\": \"caf\\u00e9 \\uD83D\\uDE00\"},\n  {\"number\": 8613900139000, \"tags\": [true, null, -1.5e3]}\n]\n",
        "{\"n\": 1}\n{\"n\": \"\\\"two\\\"\"}\n",
        "BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Zhang\\, San\r\n  Jr\r\nitem1.TEL;type=CELL;type=pref:+86 138 0013 8000\r\nitem1.X-ABLabel:_$!<Mobile>!$_\r\nEND:VCARD\r\n",
        "BEGIN:VCARD\nVERSION:2.1\nFN;CHARSET=UTF-8;ENCODING=QUOTED-PRINTABLE:=E7=8E=8B=\n=E5=B0=8F\nTEL;CELL:138\nEND:VCARD\n",
        "+8613800138000 # spam\n  # comment\n张三\n",
    ]

    static let interesting: [UInt8] = Array("\",;\t\n\r#\\{}[]:=\" .-0eE+u".utf8) + [0x00, 0xFF, 0xC3, 0xE4, 0xED, 0xF0, 0x80, 0xBF]

    func mutate(_ input: [UInt8], _ rng: inout SeededRandom) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &rng)
            switch Int.random(in: 0..<6, using: &rng) {
            case 0 where !bytes.isEmpty:
                bytes[position] = UInt8.random(in: 0...255, using: &rng)
            case 1:
                bytes.insert(Self.interesting.randomElement(using: &rng)!, at: position)
            case 2 where !bytes.isEmpty:
                bytes.remove(at: position)
            case 3:
                bytes.removeLast(bytes.count - position)
            case 4 where !bytes.isEmpty:
                let end = min(bytes.count, position + Int.random(in: 1...16, using: &rng))
                bytes.insert(contentsOf: bytes[position..<end], at: position)
            default:
                if !bytes.isEmpty { bytes[position] = Self.interesting.randomElement(using: &rng)! }
            }
        }
        return bytes
    }

    func check(_ input: [UInt8], _ what: String, _ body: () throws -> Void) {
        do {
            try body()
        } catch let error as TextFormatError {
            let lines = input.filter { $0 == 0x0A || $0 == 0x0D }.count + 1
            XCTAssert(error.line >= 1 && error.line <= lines, "\(what): line \(error.line) out of range for \(input)")
            XCTAssert(error.column.map { $0 >= 1 } ?? true, "\(what): bad column for \(input)")
            XCTAssertFalse(error.message.isEmpty)
        } catch {
            XCTFail("\(what) threw \(error) for \(input)")
        }
    }

    func testRandomMutations() {
        var rng = SeededRandom(seed: 0x5EED_1234)
        for seed in Self.seeds {
            let original = Array(seed.utf8)
            for _ in 0..<1500 {
                let input = mutate(original, &rng)
                for delimiter in [CSVDelimiter.comma, .semicolon] {
                    check(input, "CSV") {
                        try CSVReader(bytes: input, delimiter: delimiter).forEachRecord { record in
                            for i in 0..<record.count {
                                XCTAssertNotNil(String(validating: record[i], as: UTF8.self))
                            }
                        }
                    }
                }
                check(input, "CSV fixed count") { _ = try CSVReader(bytes: input, expectedFieldCount: 3).records() }
                check(input, "line list") {
                    try LineListReader(bytes: input).forEachItem { _, item in
                        XCTAssertNotNil(String(validating: item, as: UTF8.self))
                        XCTAssertFalse(item.isEmpty)
                    }
                }
                check(input, "JSON") {
                    let value = try JSONValue.parse(input)
                    XCTAssertEqual(try JSONValue.parse(value.description), value)
                }
                check(input, "JSON records") { try JSONValue.forEachRecord(in: input) { _, _ in } }
                check(input, "JSON array") { try JSONValue.forEachElement(ofTopLevelArrayIn: input) { _, _ in } }
                check(input, "vCard") { _ = try VCard.parse(input) }
                _ = CSVDelimiter.detect(in: input)
                _ = JSONValue.detectLayout(input)
            }
        }
    }

    func testAllSingleByteTruncations() {
        for seed in Self.seeds {
            let original = Array(seed.utf8)
            for length in 0...original.count {
                let input = Array(original[..<length])
                check(input, "CSV") { _ = try CSVReader(bytes: input).records() }
                check(input, "JSON") { _ = try JSONValue.parse(input) }
                check(input, "JSON records") { try JSONValue.forEachRecord(in: input) { _, _ in } }
                check(input, "vCard") { _ = try VCard.parse(input) }
                check(input, "line list") { _ = try LineListReader(bytes: input).items() }
            }
        }
    }
}
