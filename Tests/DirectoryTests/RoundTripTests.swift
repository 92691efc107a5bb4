import XCTest
@testable import Directory

/// compile -> forEachEntry -> CSV -> compile gives a byte-identical file.
final class RoundTripTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder("lookupd-roundtrip") }
    override func tearDown() { folder.cleanup() }

    /// CSV as `lookupd export` writes it, from the library's iteration.
    func exportCSV(_ directory: DirectoryFile) -> String {
        var out = "number,action,label\n"
        try! directory.forEachEntry { entry in
            out += entry.match.description + (entry.blocked ? ",block," : ",identify,")
            if let label = entry.label {
                let text = directory.label(label)
                if text.contains(where: { ",\";#".contains($0) }) {
                    out += "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
                } else {
                    out += text
                }
            }
            out += "\n"
        }
        return out
    }

    func testRoundTripIsByteIdentical() throws {
        let source = """
        number,action,label
        +8613800138000,block,Fraud Risk
        013800138001,identify,"Pizza Palace, Haidian"
        13800138002,block,
        +8613800138003,block,"He said ""hi"" twice"
        +8613800138004,identify,#1 Taxi
        +8613800138005,identify,Semi;colon
        +8613800138006,identify,北京市医院
        +12125550100,identify,New York Office
        +442079460000,block,London Office
        +86170*,block,Virtual Operator Range
        +861705555*,identify,Known Virtual Operator
        +1900*,block,
        """
        var options = DirectoryCompiler.Options()
        options.directoryVersion = 3
        let first = folder.file("first.lkd")
        try DirectoryWriter.write(try content([Source("dir.csv", .csv, source)], options: options), to: first)
        let exported = exportCSV(try DirectoryFile(path: first))
        let second = folder.file("second.lkd")
        try DirectoryWriter.write(try content([Source("export.csv", .csv, exported)], options: options), to: second)
        XCTAssertEqual(readBytes(first), readBytes(second), "export:\n\(exported)")
        XCTAssertEqual(entries(of: try DirectoryFile(path: second)), entries(of: try DirectoryFile(path: first)))
    }

    func testRandomRoundTrip() throws {
        var rng = SeededRandom(seed: 99)
        var csv = "number,action,label\n"
        let labels = ["A", "B, b", "\"C\"", "Ω", "x;y", "#tag", "long " + String(repeating: "z", count: 200)]
        var used = Set<UInt64>()
        for _ in 0..<5_000 {
            let n = UInt64.random(in: 8613000000000...8619999999999, using: &rng)
            guard used.insert(n).inserted else { continue }
            let label = labels.randomElement(using: &rng)!
            let quoted = "\"" + label.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: csv += "+\(n),block,\n"
            case 1: csv += "+\(n),identify,\(quoted)\n"
            default: csv += "+\(n),block,\(quoted)\n"
            }
        }
        let first = folder.file("first.lkd")
        try DirectoryWriter.write(try content([Source("dir.csv", .csv, csv)]), to: first)
        let second = folder.file("second.lkd")
        try DirectoryWriter.write(try content([Source("export.csv", .csv, exportCSV(try DirectoryFile(path: first)))]), to: second)
        XCTAssertEqual(readBytes(first), readBytes(second))
    }
}
