import Foundation
import XCTest

/// `lookupd compile` and `lookupd export`.
final class CompileCommandTests: CLITestCase {
    static let sampleCSV: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Config/sample-directory.csv")

    func testCompileWritesAndSummarizes() throws {
        let source = write("dir.csv", "number,action,label\n+8613800138000,block,Spam\n013800138001,identify,Bank\n+86170*,block,\n")
        let r = try lookupd(["compile", source, "-o", file("dir.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.hasPrefix("wrote \(file("dir.lkd")): 2 numbers and 1 prefix rule from 3 lines (2 blocking, 2 with a label, 2 distinct labels) in "), r.stdout)
        XCTAssertEqual(r.stderr, "")
        XCTAssertTrue(exists(file("dir.lkd")))
        let quiet = try lookupd(["compile", "-q", source, "-o", file("dir2.lkd")])
        XCTAssertEqual(quiet.status, 0)
        XCTAssertEqual(quiet.stdout, "")
        XCTAssertEqual(read(file("dir.lkd")), read(file("dir2.lkd")))
        // No temporary files are left next to the output.
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.contains("tmp") }
        XCTAssertEqual(names, [])
    }

    /// `--file-format 2` writes binary order for a fleet whose lookupd reads only 1 to 3, the
    /// same answers as the default 4; `compact` keeps a file's order; anything else is a usage error.
    func testFileFormatTwoForOlderReadersAndCompactKeepsIt() throws {
        let source = write("dir.csv", "number,action,label\n+8613800138000,block,Spam\n+8613800138001,identify,Bank\n+86170*,block,\n")
        XCTAssertEqual(try lookupd(["compile", "-q", source, "-o", file("v4.lkd")]).status, 0)
        let old = try lookupd(["compile", "-q", "--file-format", "2", source, "-o", file("v2.lkd")])
        XCTAssertEqual(old.status, 0, old.stderr)
        func format(_ path: String) throws -> String? {
            try lookupd(["inspect", path]).stdoutLines.first { $0.hasPrefix("format version:") }
        }
        XCTAssertEqual(try format(file("v4.lkd")), "format version:     4")
        XCTAssertEqual(try format(file("v2.lkd")), "format version:     2")
        for number in ["+8613800138000", "+8613800138001", "+8617012345678", "+8613900000000"] {
            let a = try lookupd(["query", "--json", "--directory", file("v4.lkd"), number])
            let b = try lookupd(["query", "--json", "--directory", file("v2.lkd"), number])
            XCTAssertEqual(a.status, b.status, number)
            XCTAssertEqual(a.stdout.replacingOccurrences(of: "v4.lkd", with: "X"), b.stdout.replacingOccurrences(of: "v2.lkd", with: "X"), number)
        }
        let added = try lookupd(["add", "+8613800138002", "--block", "--to", file("v2.lkd")])
        XCTAssertEqual(added.status, 0, added.stderr)
        let compact = try lookupd(["compact", file("v2.lkd")])
        XCTAssertEqual(compact.status, 0, compact.stderr)
        XCTAssertEqual(try format(file("v2.lkd")), "format version:     2")
        XCTAssertEqual(try lookupd(["query", "--directory", file("v2.lkd"), "+8613800138002"]).status, 0)
        let bad = try lookupd(["compile", "--file-format", "3", source, "-o", file("v3.lkd")])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("--file-format must be 4 or 2"), bad.stderr)
        XCTAssertFalse(exists(file("v3.lkd")))
    }

    /// D18: labels holding a backslash compile, with a warning that names them and the
    /// label-escapes option (twinkle 1.10 drops INVITEs whose display name holds an escaped one).
    func testLabelsWithABackslashAreWarnedAbout() throws {
        let source = write("slash.csv", "number,action,label\n+8613800138000,identify,Back\\slash\n+8613800138001,identify,Plain\n")
        let r = try lookupd(["compile", "-q", source, "-o", file("slash.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("warning: \(file("slash.lkd")): 1 label holds a backslash (\"Back\\slash\")"), r.stderr)
        XCTAssertTrue(r.stderr.contains("label-escapes = replace"), r.stderr)
        let clean = try lookupd(["compile", "-q", write("clean.csv", "number,action,label\n+8613800138001,identify,Plain\n"), "-o", file("clean.lkd")])
        XCTAssertEqual(clean.stderr, "")
    }

    /// `compile -` reads standard input (the sorting in runs a --memory
    /// too small for the input makes is tested in StreamingCompileTests,
    /// in-process: 64M, the least --memory takes, is 1.5 M entries).
    func testCompileFromStandardInput() throws {
        var csv = "number,action,label\n"
        for i in 0..<2_000 { csv += "+\(8_613_000_000_000 + UInt64((i &* 7919) % 2_000) * 3),block,Spam \(i % 7)\n" }
        let source = write("dir.csv", csv)
        let piped = try lookupd(["compile", "--memory", "64M", "-", "-o", file("piped.lkd")], stdin: Data(csv.utf8))
        XCTAssertEqual(piped.status, 0, piped.stderr)
        XCTAssertTrue(piped.stdout.hasPrefix("wrote \(file("piped.lkd")): 2000 numbers and 0 prefix rules from 2000 lines (2000 blocking, 2000 with a label, 7 distinct labels) in "), piped.stdout)
        let whole = try lookupd(["compile", "-q", source, "-o", file("whole.lkd")])
        XCTAssertEqual(whole.status, 0, whole.stderr)
        XCTAssertEqual(read(file("piped.lkd")), read(file("whole.lkd")))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix(".") }, [])
        // Diagnostics name standard input and the line.
        let bad = try lookupd(["compile", "-", "-o", file("bad.lkd")], stdin: Data("number\n+8613800138000\nnope\n".utf8))
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.hasPrefix("stdin:3: invalid number 'nope': contains letters\n"), bad.stderr)

        let small = try lookupd(["compile", "--memory", "1M", "-", "-o", file("x.lkd")], stdin: Data(csv.utf8))
        XCTAssertEqual(small.status, 2)
        XCTAssertTrue(small.stderr.contains("--memory expects a size of at least 64M"), small.stderr)
        let twice = try lookupd(["compile", "-", "-", "-o", file("x.lkd")])
        XCTAssertEqual(twice.status, 2)
        XCTAssertTrue(twice.stderr.contains("standard input (-) can be read once"), twice.stderr)
    }

    func testInvalidSourcesWriteNothing() throws {
        let source = write("bad.csv", """
        number,action,label
        +8613800138000,block,Spam
        abc,block,Spam
        +8613800138001,frobnicate,Spam
        +8613800138002,identify,
        013800138000,identify,Other
        """)
        let output = file("out.lkd")
        let r = try lookupd(["compile", source, "-o", output])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stdout, "")
        XCTAssertEqual(r.stderr, """
        \(source):3: invalid number 'abc': contains letters
        \(source):4: unknown action 'frobnicate' (expected block, identify or allow)
        \(source):5: 'identify' needs a label
        \(source):6: +8613800138000 conflicts with \(source):2 (label 'Other' here, block with label 'Spam' there); use --on-duplicate first|last to choose
        lookupd: error: 4 errors; \(output) not written (--skip-invalid leaves bad lines out)

        """)
        XCTAssertFalse(exists(output), "nothing may be written when a source is invalid")
    }

    func testFailedCompileLeavesTheOldFileAlone() throws {
        let output = try compileCSV("number\n+8613800138000\n", to: "dir.lkd")
        let before = read(output)
        let bad = write("bad.txt", "+8613800138001\nnot a number\n")
        let r = try lookupd(["compile", bad, "-o", output])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "\(bad):2: invalid number 'not a number': contains letters\nlookupd: error: 1 error; \(output) not written (--skip-invalid leaves bad lines out)\n")
        XCTAssertEqual(read(output), before)
    }

    func testMaxErrors() throws {
        let source = write("bad.txt", (1...10).map { "bad\($0)" }.joined(separator: "\n"))
        let r = try lookupd(["compile", "--max-errors", "2", source, "-o", file("out.lkd")])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr.split(separator: "\n").map(String.init), [
            "\(source):1: invalid number 'bad1': contains letters",
            "\(source):2: invalid number 'bad2': contains letters",
            "... and 8 more errors",
            "lookupd: error: 10 errors; \(file("out.lkd")) not written (--skip-invalid leaves bad lines out)",
        ])
        XCTAssertFalse(exists(file("out.lkd")))
    }

    func testUnreadableAndUnguessableSources() throws {
        let missing = file("missing.csv")
        var r = try lookupd(["compile", missing, "-o", file("out.lkd")])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "lookupd: error: \(missing): cannot open: No such file or directory\n")
        XCTAssertFalse(exists(file("out.lkd")))

        let dat = write("numbers.dat", "+8613800138000\n")
        r = try lookupd(["compile", dat, "-o", file("out.lkd")])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.hasPrefix("\(dat): cannot tell the format from the file name"), r.stderr)
        XCTAssertFalse(exists(file("out.lkd")))
        r = try lookupd(["compile", "--format", "text", dat, "-o", file("out.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)

        r = try lookupd(["compile", write("ok.txt", "+8613800138000\n"), "-o", file("no/such/folder/out.lkd")])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.hasPrefix("lookupd: error: "), r.stderr)
        XCTAssertTrue(r.stderr.contains("No such file or directory"), r.stderr)
    }

    func testSourceFromStandardInput() throws {
        let r = try lookupd(["compile", "--format", "text", "-", "-o", file("stdin.lkd")], stdin: Data("+8613800138000\n0170*\n".utf8))
        XCTAssertEqual(r.status, 0, r.stderr)
        let check = try lookupd(["check", file("stdin.lkd")])
        XCTAssertTrue(check.stdout.contains("ok (1 number, 1 prefix rule, 0 labels"), check.stdout)
    }

    func testPlanOptionsAndConfig() throws {
        let source = write("us.csv", "number,label\n(212) 555-0100,NY Office\n1-212-555-0101,NY Annex\n")
        // Under the default China plan these read as Chinese numbers.
        var r = try lookupd(["compile", source, "-o", file("cn.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try lookupd(["compile", "--country-code", "1", "--national-prefix", "1", "--international-prefix", "011", source, "-o", file("us.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)
        let us = write("us.conf", "country-code = 1\nnational-prefix = 1\ninternational-prefix = 011\n")
        r = try lookupd(["compile", "--config", us, source, "-o", file("us2.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(read(file("us.lkd")), read(file("us2.lkd")))
        XCTAssertNotEqual(read(file("us.lkd")), read(file("cn.lkd")))
        let q = try lookupd(["query", "--config", planConfig, "--directory", file("us.lkd"), "+1 212 555 0100", "+12125550101"])
        XCTAssertEqual(q.stdoutLines.map { $0.split(separator: "\t").prefix(4).joined(separator: "|") },
                       ["+1 212 555 0100|+12125550100|identified|NY Office", "+12125550101|+12125550101|identified|NY Annex"])
        // $LOOKUPD_CONFIG is used when --config is not given.
        r = try lookupd(["compile", source, "-o", file("us3.lkd")], environment: ["LOOKUPD_CONFIG": us])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(read(file("us.lkd")), read(file("us3.lkd")))
        let broken = write("broken.conf", "directroy = x\n")
        r = try lookupd(["compile", "--config", broken, source, "-o", file("us4.lkd")])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "lookupd: error: \(broken):1: unknown key 'directroy' (did you mean 'directory'?)\n")
    }

    func testDuplicatePolicyOption() throws {
        let a = write("a.csv", "number,action,label\n+8613800138000,identify,First\n")
        let b = write("b.csv", "number,action,label\n+8613800138000,identify,Second\n")
        XCTAssertEqual(try lookupd(["compile", a, b, "-o", file("x.lkd")]).status, 1)
        for (policy, label) in [("first", "First"), ("last", "Second")] {
            let out = file("\(policy).lkd")
            let r = try lookupd(["compile", "--on-duplicate", policy, a, b, "-o", out])
            XCTAssertEqual(r.status, 0, r.stderr)
            XCTAssertTrue(r.stdout.contains("; 1 repeated number kept its \(policy) row"), r.stdout)
            let q = try lookupd(["query", "--config", planConfig, "--directory", out, "--json", "+8613800138000"])
            XCTAssertEqual(jsonLines(q.stdout).first.map { field($0, "label") }, label, policy)
        }
    }

    // MARK: - Round trip

    func testCompileExportCompileIsByteIdentical() throws {
        let source = file("sample.csv")
        try FileManager.default.copyItem(atPath: Self.sampleCSV.path, toPath: source)
        let extra = write("extra.csv", """
        number,action,label
        +8613800000001,identify,"He said ""hi"", twice"
        +8613800000002,identify,#1 Taxi
        +8613800000003,block,Semi;colon
        +8613800000004,identify,北京市医院
        +8613800000005,block,
        +1900*,block,
        """)
        let first = file("first.lkd")
        var r = try lookupd(["compile", "--directory-version", "42", source, extra, "-o", first])
        XCTAssertEqual(r.status, 0, r.stderr)

        r = try lookupd(["export", first])
        XCTAssertEqual(r.status, 0, r.stderr)
        let exported = r.stdout
        XCTAssertTrue(exported.hasPrefix("number,action,label\n+12125550100,identify,New York Office\n"), exported)
        XCTAssertTrue(exported.contains("\n+8613800000001,identify,\"He said \"\"hi\"\", twice\"\n"), exported)
        XCTAssertTrue(exported.contains("\n+8613800000005,block,\n"), exported)
        XCTAssertTrue(exported.hasSuffix("\n+1900*,block,\n+86170*,block,Virtual Operator Range\n+861705555*,identify,Known Virtual Operator\n"), exported)

        // export -o writes the same text.
        r = try lookupd(["export", "-o", file("export.csv"), first])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "")
        XCTAssertEqual(String(decoding: read(file("export.csv")), as: UTF8.self), exported)

        let second = file("second.lkd")
        r = try lookupd(["compile", "--directory-version", "42", file("export.csv"), "-o", second])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(read(first), read(second), "compile -> export -> compile must give the same bytes")
        XCTAssertGreaterThan(read(first).count, 256)
    }

    func testExportOfADamagedFile() throws {
        let r = try lookupd(["export", write("junk.lkd", String(repeating: "x", count: 300))])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "lookupd: error: \(file("junk.lkd")): not a lookupd directory (bad magic number)\n")
        XCTAssertEqual(r.stdout, "")
    }
}
