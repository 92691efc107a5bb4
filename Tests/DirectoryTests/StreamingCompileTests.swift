import Foundation
import SystemCalls
import XCTest
@testable import Directory

/// The bounded-memory compile: sources read in pieces, entries sorted in
/// runs on disk and merged, the file streamed out. Whatever the memory
/// budget, the file and the diagnostics must be exactly those of a compile
/// held in memory.
final class StreamingCompileTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder("lookupd-streaming") }
    override func tearDown() { folder.cleanup() }

    /// A budget giving runs of about 10,000 entries (the sorter holds 32
    /// bytes an entry in three quarters of the budget).
    static let smallBudget = 10_000 * 32 * 4 / 3
    /// The smallest runs the sorter makes: 1,024 entries.
    static let tinyBudget = 1024 * 32 * 4 / 3 + 64

    /// `n` numbers in a scattered order, half blocked, half labelled, some
    /// lines given twice (agreeing), and 50 prefix rules.
    func scatteredSource(_ n: Int) -> String {
        var text = "number,action,label\n"
        text.reserveCapacity(n * 40)
        for i in 0..<n {
            let j = (i &* 7919) % n
            let number = 8_613_800_000_000 + UInt64(j) * 3
            text += j % 2 == 0 ? "+\(number),block,Spam \(j % 97)\n" : "+\(number),identify,Shop \(j % 1013)\n"
            if i % 1000 == 0 { text += j % 2 == 0 ? "+\(number),block,Spam \(j % 97)\n" : "+\(number),identify,Shop \(j % 1013)\n" }
        }
        for k in 0..<50 { text += "+8617\(10 + k)*,block,Range \(k)\n" }
        return text
    }

    func compiler(budget: Int?, onDuplicate: DuplicatePolicy = .error) -> DirectoryCompiler {
        var options = DirectoryCompiler.Options()
        options.onDuplicate = onDuplicate
        if let budget {
            options.memoryBudget = budget
            options.temporaryFolder = folder.path
        }
        return DirectoryCompiler(options: options)
    }

    func written(_ result: Result<DirectoryCompiler.Written, CompileFailure>, file: StaticString = #filePath,
                 line: UInt = #line) throws -> DirectoryCompiler.Written {
        switch result {
        case .success(let w): return w
        case .failure(let f):
            XCTFail("compile failed: \(f.diagnostics.map(\.description))", file: file, line: line)
            throw TestError("compile failed")
        }
    }

    /// "block Spam 3", "identify Shop 5": what the file says of a number.
    func answer(_ file: DirectoryFile, _ number: UInt64) throws -> String? {
        guard let entry = try file.lookup(PhoneNumber(value: number)!) else { return nil }
        return (entry.blocked ? "block" : "identify") + (entry.label.map { " " + file.label($0) } ?? "")
    }

    func leftovers() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasPrefix(".") }.sorted()
    }

    func testRunsOnDiskGiveTheSameFileAsMemory() throws {
        // 60,000 numbers: the tree's lowest level holds more slots than one
        // write buffer of the stream writer (16,384), so it is written in
        // several pieces, and the labels and prefixes cross block edges.
        let n = 60_000
        let source = folder.write("dir.csv", Array(scatteredSource(n).utf8))

        let inMemory = compiler(budget: nil)
        try inMemory.add(path: source)
        let memoryFile = folder.file("memory.lkd")
        let a = try written(try inMemory.write(to: memoryFile))
        XCTAssertEqual(a.runs, 0)

        let onDisk = compiler(budget: Self.smallBudget)
        try onDisk.add(path: source)
        let diskFile = folder.file("disk.lkd")
        let b = try written(try onDisk.write(to: diskFile))
        XCTAssertGreaterThanOrEqual(b.runs, 6, "the small budget must make the sorter spill")
        XCTAssertGreaterThan(b.temporaryBytes, 0)
        XCTAssertEqual(leftovers(), [], "the runs and the spool are removed")

        // The in-memory content written by the array API: the third way.
        let classic = compiler(budget: nil)
        try classic.add(path: source)
        guard case .success(let content) = classic.finish() else { return XCTFail("finish failed") }
        let classicFile = folder.file("classic.lkd")
        try DirectoryWriter.write(content, to: classicFile)

        XCTAssertEqual(readBytes(diskFile), readBytes(memoryFile))
        XCTAssertEqual(readBytes(classicFile), readBytes(memoryFile))
        XCTAssertEqual(a.exactEntries, n)
        XCTAssertEqual(b.exactEntries, n)
        XCTAssertEqual(b.prefixRules, 50)
        XCTAssertEqual(b.blocking, n / 2 + 50)
        XCTAssertEqual(b.identified, n + 50)
        XCTAssertEqual(b.labels, 97 + 1013 + 50)
        XCTAssertEqual(onDisk.summary.duplicatesMerged, n / 1000)

        let file = try DirectoryFile(path: diskFile)
        try file.verify()
        XCTAssertEqual(file.count, n)
        XCTAssertEqual(file.prefixRuleCount, 50)
        for j in stride(from: 0, to: n, by: 997) {
            XCTAssertEqual(try answer(file, 8_613_800_000_000 + UInt64(j) * 3), j % 2 == 0 ? "block Spam \(j % 97)" : "identify Shop \(j % 1013)", "entry \(j)")
        }
        XCTAssertNil(try answer(file, 8_613_800_000_001))
    }

    /// A conflict between lines that land in different runs (and files)
    /// names both lines, as a compile in memory does; first and last pick
    /// by reading order across runs.
    func testConflictsAcrossRunsNameBothLines() throws {
        var a = "number,action,label\n+8613900000000,block,Fraud\n"
        for i in 0..<5_000 { a += "+\(8_613_800_000_000 + UInt64(i)),block,\n" }
        var b = "number,action,label\n"
        for i in 0..<5_000 { b += "+\(8_613_700_000_000 + UInt64(i)),block,\n" }
        b += "+8613900000000,identify,Bank\n"
        let pathA = folder.write("a.csv", Array(a.utf8)), pathB = folder.write("b.csv", Array(b.utf8))
        let expected = "\(pathB):5002: +8613900000000 conflicts with \(pathA):2 (label 'Bank' here, block with label 'Fraud' there); use --on-duplicate first|last to choose"

        for budget in [nil, Self.tinyBudget] {
            let c = compiler(budget: budget)
            try c.add(path: pathA)
            try c.add(path: pathB)
            guard case .failure(let failure) = try c.write(to: folder.file("out.lkd")) else { return XCTFail("a conflict must fail") }
            XCTAssertEqual(failure.diagnostics.map(\.description), [expected], "budget \(String(describing: budget))")
            XCTAssertFalse(FileManager.default.fileExists(atPath: folder.file("out.lkd")))
            XCTAssertEqual(leftovers(), [])
        }
        for (policy, answer) in [(DuplicatePolicy.first, "block Fraud"), (.last, "identify Bank")] {
            let c = compiler(budget: Self.tinyBudget, onDuplicate: policy)
            try c.add(path: pathA)
            try c.add(path: pathB)
            let w = try written(try c.write(to: folder.file("\(policy).lkd")))
            XCTAssertGreaterThan(w.runs, 1)
            XCTAssertEqual(w.exactEntries, 10_001)
            let file = try DirectoryFile(path: folder.file("\(policy).lkd"))
            XCTAssertEqual(try self.answer(file, 8_613_900_000_000), answer, "\(policy)")
        }
    }

    /// A source longer than one read piece (8 MiB), with CRLF line ends and
    /// a quoted field (with the delimiter in it) astride the first piece's
    /// end: every line is read once, and a bad line past the edge is
    /// reported at its own line.
    func testSourcesLongerThanOnePiece() throws {
        // Long labels: few lines (a debug build parses slowly) fill a piece.
        let filler = String(repeating: "x", count: 200)
        var bytes = Array("number,action,label\r\n".utf8)
        bytes.reserveCapacity(SourceStream.pieceSize + 1_000_000)
        var line = 1
        var count = 0
        while bytes.count < SourceStream.pieceSize - 30 {
            bytes += Array("+\(8_613_800_000_000 + UInt64(count)),identify,\(filler)\r\n".utf8)
            line += 1
            count += 1
        }
        bytes += Array("+8613900000000,identify,\"Quoted, across the edge of the piece\"\r\n".utf8)
        line += 1
        count += 1
        for i in 0..<5_000 {
            bytes += Array("+\(8_613_700_000_000 + UInt64(i)),identify,\(filler)\r\n".utf8)
            line += 1
            count += 1
        }
        bytes += Array("+86139abc,block,\r\n".utf8)
        line += 1
        let source = folder.write("long.csv", bytes)
        XCTAssertGreaterThan(bytes.count, SourceStream.pieceSize)

        var options = DirectoryCompiler.Options()
        options.skipInvalid = true
        let lenient = DirectoryCompiler(options: options)
        try lenient.add(path: source)
        let w = try written(try lenient.write(to: folder.file("long.lkd")))
        XCTAssertEqual(lenient.warnings.map(\.description), ["\(source):\(line): skipped: '+86139abc' has letters: a vanity number? --vanity reads them as keypad digits (+86139222)"])
        XCTAssertEqual(w.exactEntries, count)
        XCTAssertEqual(lenient.linesRead, line - 1)
        let file = try DirectoryFile(path: folder.file("long.lkd"))
        XCTAssertEqual(try answer(file, 8_613_900_000_000), "identify Quoted, across the edge of the piece")
        XCTAssertEqual(try answer(file, 8_613_700_000_000 + 4_999), "identify " + filler)
    }

    /// Windows "Unicode" (UTF-16 with a BOM) is read whole and converted,
    /// from a file as from memory.
    func testUTF16SourceFromAFile() throws {
        let text = "number,action,label\r\n+8613800138000,identify,Иван\r\n"
        let source = folder.write("utf16.csv", [0xFF, 0xFE] + text.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })
        let c = compiler(budget: nil)
        try c.add(path: source)
        let w = try written(try c.write(to: folder.file("utf16.lkd")))
        XCTAssertEqual(w.exactEntries, 1)
        XCTAssertEqual(try answer(try DirectoryFile(path: folder.file("utf16.lkd")), 8_613_800_138_000), "identify Иван")
    }

    /// A pipe, as `lookupd compile -` reads it: the same file as from disk.
    func testPipeGivesTheSameFileAsTheFile() throws {
        let text = scatteredSource(15_000)
        let source = folder.write("dir.csv", Array(text.utf8))
        let fromFile = compiler(budget: Self.smallBudget)
        try fromFile.add(path: source)
        _ = try written(try fromFile.write(to: folder.file("file.lkd")))

        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let bytes = Array(text.utf8)
        let readEnd = fds[0], writeEnd = fds[1]
        let writer = Thread {
            bytes.withUnsafeBytes { raw in
                var done = 0
                while done < raw.count {
                    let n = Foundation.write(writeEnd, raw.baseAddress! + done, raw.count - done)
                    if n <= 0 { break }
                    done += n
                }
            }
            close(writeEnd)
        }
        writer.start()
        let fromPipe = compiler(budget: Self.smallBudget)
        try fromPipe.add(descriptor: FileDescriptor(rawValue: readEnd), name: source, format: .csv)
        close(readEnd)
        _ = try written(try fromPipe.write(to: folder.file("pipe.lkd")))
        XCTAssertEqual(readBytes(folder.file("pipe.lkd")), readBytes(folder.file("file.lkd")))
    }
}
