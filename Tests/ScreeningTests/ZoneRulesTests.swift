import Foundation
import Glibc
import Loading
import XCTest
@testable import Screening

/// Time zones are read into values (ZoneRules) once per load; nothing sets the process's TZ.
/// These tests hold them to glibc's answers, transition by transition.
final class ZoneRulesTests: XCTestCase {
    /// 2024-03-10 07:00:00 UTC, when New York went from EST to EDT.
    let usSpring2024: Int64 = 1_710_054_000
    /// 2024-11-03 06:00:00 UTC, back to EST.
    let usAutumn2024: Int64 = 1_730_613_600

    func testPOSIXRuleChangesAtTheRightSecond() throws {
        let newYork = try XCTUnwrap(ZoneRules(posix: "EST5EDT,M3.2.0,M11.1.0"))
        XCTAssertEqual(newYork.offset(atUTC: usSpring2024 - 1), -5 * 3600)
        XCTAssertEqual(newYork.offset(atUTC: usSpring2024), -4 * 3600)
        XCTAssertEqual(newYork.offset(atUTC: usAutumn2024 - 1), -4 * 3600)
        XCTAssertEqual(newYork.offset(atUTC: usAutumn2024), -5 * 3600)
        // A daylight name without a rule takes the US rule.
        XCTAssertEqual(ZoneRules(posix: "EST5EDT")?.offset(atUTC: usSpring2024), -4 * 3600)

        // South of the equator daylight time spans the new year: Sydney, 2024-10-06 02:00
        // AEST (2024-10-05 16:00 UTC) to 2025-04-06 03:00 AEDT (2025-04-05 16:00 UTC).
        let sydney = try XCTUnwrap(ZoneRules(posix: "AEST-10AEDT,M10.1.0,M4.1.0/3"))
        XCTAssertEqual(sydney.offset(atUTC: 1_728_144_000 - 1), 10 * 3600)
        XCTAssertEqual(sydney.offset(atUTC: 1_728_144_000), 11 * 3600)
        XCTAssertEqual(sydney.offset(atUTC: 1_735_689_600), 11 * 3600, "new year's day")
        XCTAssertEqual(sydney.offset(atUTC: 1_743_868_800 - 1), 11 * 3600)
        XCTAssertEqual(sydney.offset(atUTC: 1_743_868_800), 10 * 3600)

        XCTAssertEqual(ZoneRules(posix: "<+0330>-3:30")?.offset(atUTC: 0), 3 * 3600 + 1800)
        XCTAssertEqual(ZoneRules(posix: "<-01>1")?.offset(atUTC: 0), -3600)
        XCTAssertEqual(ZoneRules(posix: "CST-8")?.localTime(utc: 1_700_000_000).description, "Wed 06:13")
    }

    func testPOSIXStringsThatAreNotZones() {
        for text in ["", "C", "AB-1", "CST", "CST-", "CST-25", "CST-8:60", "CST-8,M3", "EST5EDT,M13.1.0,M11.1.0",
                     "EST5EDT,M3.2.0", "EST5EDT,M3.6.0,M11.1.0", "EST5EDT,M3.2.7,M11.1.0", "EST5EDT,J0,J100",
                     "EST5EDT,M3.2.0/200,M11.1.0", "<AB>1", "<ABC1", "CST-8 ", "Asia/Shanghai"] {
            XCTAssertNil(ZoneRules(posix: text), text)
        }
    }

    func testDamagedTZifIsRefused() throws {
        func parse(_ bytes: [UInt8]) -> Result<ZoneRules, ZoneError> {
            bytes.withUnsafeBytes { raw in Result { () throws(ZoneError) in try ZoneRules(tzif: raw, name: "test") } }
        }
        let berlin = try XCTUnwrap(FileManager.default.contents(atPath: "/usr/share/zoneinfo/Europe/Berlin"))
        var bytes = [UInt8](berlin)
        XCTAssertNoThrow(try parse(bytes).get())
        for cut in [0, 10, 44, 100, bytes.count / 2, bytes.count - 1] {
            XCTAssertThrowsError(try parse(Array(bytes[..<cut])).get(), "cut at \(cut)")
        }
        bytes[0] = UInt8(ascii: "X")
        XCTAssertThrowsError(try parse(bytes).get()) { error in
            XCTAssertTrue("\(error)".contains("TZif magic"), "\(error)")
        }
    }

    func testLoaderReadsNamesAsGlibcDoes() throws {
        XCTAssertEqual(try ZoneLoader.load("UTC").offset(atUTC: usSpring2024), 0)
        XCTAssertEqual(try ZoneLoader.load("Europe/Berlin").offset(atUTC: usSpring2024), 3600)
        XCTAssertEqual(try ZoneLoader.load(":Asia/Tokyo").offset(atUTC: 0), 9 * 3600)
        XCTAssertEqual(try ZoneLoader.load("/usr/share/zoneinfo/Asia/Kolkata").offset(atUTC: usSpring2024), 5 * 3600 + 1800)
        XCTAssertEqual(try ZoneLoader.load("CST-8").offset(atUTC: 0), 8 * 3600)
        XCTAssertEqual(try ZoneLoader.load("").offset(atUTC: usSpring2024), 0, "an empty TZ is UTC")
        for bad in ["Mars/Olympus_Mons", "../../etc/passwd", ":No/Such_Zone", "/etc/passwd"] {
            XCTAssertThrowsError(try ZoneLoader.load(bad), bad)
        }
        // Loading zones leaves the process's own zone alone.
        let before = getenv("TZ").map { String(cString: $0) }
        _ = try ZoneLoader.load("America/New_York")
        _ = try ZoneLoader.load(nil)
        XCTAssertEqual(getenv("TZ").map { String(cString: $0) }, before)
    }

    /// Every transition of these zones (the second before, at, and after it) and a moment of
    /// every third day from 1900 to 2100 (the time of day moving by an hour and seconds each time),
    /// against `date` in a child process with TZ set: glibc's localtime_r, read from outside.
    /// After 2037 the files' footer rules decide, so those are covered too.
    func testOffsetsAgreeWithGlibcAcrossEveryChange() throws {
        let zones = ["Europe/Berlin", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe", "Asia/Shanghai",
                     "America/Sao_Paulo", "Africa/Casablanca", "Europe/Dublin", "Pacific/Chatham", "Asia/Kolkata",
                     "America/St_Johns", "Antarctica/Troll", "Pacific/Apia", "America/Santiago", "Asia/Tehran",
                     "Pacific/Kiritimati", "America/Godthab", "Etc/GMT+5"]
        // POSIX strings are compared from 1971 on: glibc's rule arithmetic starts every year
        // before 1971 at the epoch.
        let rules = ["CET-1CEST,M3.5.0,M10.5.0/3", "AEST-10AEDT,M10.1.0,M4.1.0/3", "<-03>3<-02>,M3.5.0/-2,M10.5.0/-1",
                     "IST-2IDT,M3.4.4/26,M10.5.0", "NZST-12NZDT,M9.5.0,M4.1.0/3", "<+13>-13", "ABC3DEF,J60/1,J300",
                     "ABC3DEF,59/1,300", "XYZ-5:45", "EST5EDT,M3.2.0/0:30:15,M11.1.0/1:15"]
        let folder = TemporaryFolder("zones")
        defer { folder.cleanup() }
        let start: Int64 = -2_208_988_800  // 1900-01-01
        let end: Int64 = 4_102_444_800     // 2100-01-01
        var disagreements: [String] = []
        for (name, isPOSIX) in zones.map({ ($0, false) }) + rules.map({ ($0, true) }) {
            let zone = isPOSIX ? try XCTUnwrap(ZoneRules(posix: name), name) : try ZoneLoader.load(name)
            var moments: [Int64] = []
            var t = isPOSIX ? 31_536_000 : start
            while t < end { moments.append(t); t += 3 * 86400 + 3607 }
            for transition in zone.transitions { moments += [transition - 1, transition, transition + 1] }
            if let daylight = zone.rule?.daylight {
                for year in Int64(1971)...2099 {
                    let change = [daylight.start.day(in: year) * 86400 + Int64(daylight.startTime) - Int64(zone.rule!.standardOffset),
                                  daylight.end.day(in: year) * 86400 + Int64(daylight.endTime) - Int64(daylight.offset)]
                    for c in change where c > (isPOSIX ? 31_536_000 : start) { moments += [c - 1, c, c + 1] }
                }
            }
            var text: [UInt8] = []
            for moment in moments { text += Array("@\(moment)\n".utf8) }
            let input = folder.write("moments", text)
            let result = try runCommand("/usr/bin/date", ["-f", input, "+%::z"], folder: folder.path, timeout: 120,
                                        environment: ["TZ": name, "LC_ALL": "C"])
            XCTAssertEqual(result.status, 0, "\(name): \(result.stderr)")
            // One `+hh:mm:ss` line per moment, read as bytes (Strings split slowly in debug builds).
            let output = Array(result.stdout.utf8)
            XCTAssertEqual(output.count, moments.count * 10, name)
            guard output.count == moments.count * 10 else { continue }
            for (k, moment) in moments.enumerated() {
                let line = output[(10 * k)..<(10 * k + 9)]
                func digits(_ at: Int) -> Int64 { Int64(line[line.startIndex + at] - 48) * 10 + Int64(line[line.startIndex + at + 1] - 48) }
                let expected = (line.first == UInt8(ascii: "-") ? -1 : 1) * (digits(1) * 3600 + digits(4) * 60 + digits(7))
                let got = zone.offset(atUTC: moment)
                if expected != got, disagreements.count < 20 {
                    disagreements.append("\(name) at @\(moment): glibc \(String(decoding: line, as: UTF8.self)), ZoneRules \(got) s")
                }
            }
        }
        XCTAssertEqual(disagreements, [])
    }

    /// The decision log's and etcd values' timestamps, against `date -u`: leap days,
    /// centuries, before 1970; and back from the calendar to the moment.
    func testUTCTimeAgreesWithGlibc() throws {
        let folder = TemporaryFolder("utc")
        defer { folder.cleanup() }
        var moments: [Int64] = [0, -1, 951_782_399, 951_782_400, 951_868_799, 4_107_542_399, -2_208_988_801]
        var t: Int64 = -2_208_988_800
        while t < 4_102_444_800 { moments.append(t); t += 86_400 * 11 + 3_671 }
        let input = folder.write("moments", moments.map { "@\($0)" }.joined(separator: "\n") + "\n")
        let result = try runCommand("/usr/bin/date", ["-u", "-f", input, "+%Y-%m-%dT%H:%M:%S"], folder: folder.path, timeout: 60,
                                    environment: ["LC_ALL": "C"])
        let lines = result.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, moments.count)
        var disagreements: [String] = []
        for (moment, line) in zip(moments, lines) {
            let u = UTCTime(seconds: moment)
            if u.text != line, disagreements.count < 10 { disagreements.append("@\(moment): date \(line), UTCTime \(u.text)") }
            let back = UTCTime.seconds(year: u.year, month: u.month, day: u.day, hour: u.hour, minute: u.minute, second: u.second)
            if back != moment, disagreements.count < 10 { disagreements.append("@\(moment): \(line) read back as @\(back)") }
        }
        XCTAssertEqual(disagreements, [])
    }
}
