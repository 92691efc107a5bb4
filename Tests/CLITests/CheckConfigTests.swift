import Foundation
import XCTest

/// `lookupd check-config`: every error of a configuration at once, then
/// every file it names, and what is in force when all is sound.
final class CheckConfigTests: CLITestCase {
    func testThreeMistakesAtOnce() throws {
        let config = write("bad.conf", """
        # three mistakes, each on its own line
        directroy = main.lkd
        listen = udp:nowhere
        country-code = 86
        workers = lots

        """)
        let r = try lookupd(["check-config", "--config", config])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stdout, "")
        XCTAssertEqual(r.stderr, """
        \(config):2: unknown key 'directroy' (did you mean 'directory'?)
        \(config):3: listen: expected udp:HOST:PORT or tcp:HOST:PORT (IPv6 in brackets)
        \(config):5: workers: expected auto or a number from 1 to 256
        lookupd: error: 3 errors in \(config)

        """)
        // serve refuses to start with the same messages, every one of them.
        let serve = try lookupd(["serve", "--config", config], timeout: 30)
        XCTAssertEqual(serve.status, 1, serve.summary)
        XCTAssertEqual(serve.stderr, r.stderr, "serve prints what check-config prints")
        // query still stops at the first error.
        XCTAssertTrue(try lookupd(["query", "--config", config, "+8613800138000"]).stderr.contains("\(config):2: unknown key 'directroy'"))
    }

    func testEveryNamedFileIsOpenedAndVerified() throws {
        let good = try compileCSV("number,action,label\n+8613800138000,block,Fraud\n", to: "good.lkd")
        var damaged = Array(FileManager.default.contents(atPath: good)!)
        damaged[damaged.count - 20] ^= 0xFF
        _ = write("damaged.lkd", Data(damaged))
        let config = write("files.conf", """
        directory = good.lkd name=good
        directory = damaged.lkd name=damaged
        directory = missing.lkd name=missing
        listen = udp:127.0.0.1:5099

        """)
        var r = try lookupd(["check-config", "--config", config])
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("lookupd: error: directory damaged: "), r.stderr)
        XCTAssertTrue(r.stderr.contains("lookupd: error: directory missing: "), r.stderr)
        XCTAssertTrue(r.stderr.contains("No such file or directory"), r.stderr)
        XCTAssertFalse(r.stderr.contains("directory good:"), r.stderr)

        let sound = write("sound.conf", "country-code = 86\ndirectory = good.lkd name=good\nlisten = udp:127.0.0.1:5099\nhttp-listen = 127.0.0.1:9180\n")
        r = try lookupd(["check-config", "--config", sound])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdoutLines.first, "\(sound): ok")
        XCTAssertTrue(r.stdoutLines.contains("listen: udp:127.0.0.1:5099"), r.stdout)
        XCTAssertTrue(r.stdoutLines.contains("http-listen: 127.0.0.1:9180"), r.stdout)
        XCTAssertTrue(r.stdoutLines.contains("udp-steering: flow"), r.stdout)
        XCTAssertTrue(r.stdoutLines.contains { $0.hasPrefix("directory good: ") && $0.hasSuffix("1 number, 0 prefix rules") }, r.stdout)
        XCTAssertTrue(r.stdoutLines.contains { $0.hasPrefix("numbering plan: ") }, r.stdout)
    }

    /// `--json`: the same facts as one object, sound or not, with the same exit status.
    func testJSONHoldsTheErrorsOrWhatIsInForce() throws {
        func object(_ r: RunResult) throws -> [String: Any] {
            XCTAssertEqual(r.stdout.filter { $0 == "\n" }.count, 1, r.stdout)
            return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], r.stdout)
        }
        let bad = write("bad.conf", "directroy = main.lkd\nworkers = lots\n")
        var r = try lookupd(["check-config", "--json", "--config", bad])
        XCTAssertEqual(r.status, 1, r.stderr)
        var o = try object(r)
        XCTAssertEqual(o["ok"] as? Bool, false)
        XCTAssertEqual(o["config"] as? String, bad)
        let errors = try XCTUnwrap(o["errors"] as? [[String: Any]])
        XCTAssertEqual(errors.map { $0["line"] as? Int }, [1, 2])
        XCTAssertEqual(errors.first?["message"] as? String, "unknown key 'directroy' (did you mean 'directory'?)")
        XCTAssertTrue(o["numbering_plan"] is NSNull)

        let good = try compileCSV("number,action,label\n+8613800138000,block,Fraud\n+8613800138001,block,Fraud\n", to: "good.lkd")
        XCTAssertEqual(try lookupd(["add", "+8613800138002", "--block", "--to", good]).status, 0)
        let missing = write("missing.conf", "country = CN\ndirectory = good.lkd name=good\ndirectory = gone.lkd name=gone\n")
        r = try lookupd(["check-config", "--json", "--config", missing])
        XCTAssertEqual(r.status, 1, r.stderr)
        o = try object(r)
        XCTAssertEqual(o["ok"] as? Bool, false)
        XCTAssertEqual((o["problems"] as? [String])?.count, 1, "\(o)")
        XCTAssertTrue((o["problems"] as? [String])?.first?.hasPrefix("directory gone: ") ?? false, "\(o)")

        let sound = write("sound.conf", "country = CN\ndirectory = good.lkd name=good\nlisten = udp:127.0.0.1:5099\nlisten = tcp:127.0.0.1:5099\n")
        r = try lookupd(["check-config", "--json", "--config", sound])
        XCTAssertEqual(r.status, 0, r.stderr)
        o = try object(r)
        XCTAssertEqual(o["ok"] as? Bool, true)
        XCTAssertEqual(o["listen"] as? [String], ["udp:127.0.0.1:5099", "tcp:127.0.0.1:5099"])
        XCTAssertEqual(o["mode"] as? String, "redirect")
        XCTAssertEqual(o["udp_steering"] as? String, "flow")
        XCTAssertTrue(o["http_listen"] is NSNull)
        let directory = try XCTUnwrap((o["directories"] as? [[String: Any]])?.first)
        // Against the file itself: inspect --json reads the same counts.
        let inspect = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(try lookupd(["inspect", "--json", good]).stdout.utf8)) as? [String: Any])
        XCTAssertEqual(directory["numbers"] as? Int, inspect["numbers"] as? Int)
        XCTAssertEqual(directory["numbers"] as? Int, 2)
        XCTAssertEqual(directory["journal_changes"] as? Int, 1)
        XCTAssertEqual(directory["path"] as? String, good)
        XCTAssertTrue((o["numbering_plan"] as? String)?.hasPrefix("CN") ?? false, "\(o)")
    }

    /// A blocks-dir is named with how many callees' lists loaded; a list with a bad line is
    /// left out with a warning naming FILE:LINE, and the count says so.
    func testBlocksDirIsReported() throws {
        let good = try compileCSV("number,action,label\n+8613800138000,block,Fraud\n", to: "good.lkd")
        let folder = file("blocks")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        _ = write("blocks/1001.csv", "number,action,label\n+8613800138001,block,Neighbour\n")
        _ = write("blocks/1002.csv", "number,action,label\nnot a number,block,Oops\n")
        let config = write("blocks.conf", "country = CN\ndirectory = \(good) name=good\nblocks-dir = \(folder)\nlisten = udp:127.0.0.1:5099\n")
        var r = try lookupd(["check-config", "--config", config])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdoutLines.contains("blocks-dir: \(folder)/: 1 callee list loaded"), r.stdout)
        XCTAssertTrue(r.stderr.contains("1002.csv:2:"), r.stderr)
        r = try lookupd(["check-config", "--json", "--config", config])
        let o = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], r.stdout)
        XCTAssertEqual(o["blocks_dir"] as? String, folder)
        XCTAssertEqual(o["callee_block_lists"] as? Int, 1)
        let without = write("plain.conf", "country = CN\ndirectory = \(good) name=good\n")
        let p = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(try lookupd(["check-config", "--json", "--config", without]).stdout.utf8)) as? [String: Any])
        XCTAssertTrue(p["callee_block_lists"] is NSNull, "\(p)")
    }
}
