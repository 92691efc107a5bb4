import Foundation
import XCTest

/// The systemd side: the shipped unit passes `systemd-analyze verify` and
/// stays within the security budget, and the daemon speaks the sd_notify
/// protocol (READY, RELOADING with MONOTONIC_USEC, STATUS, WATCHDOG).
final class SystemdTests: DaemonTestCase {
    static let unitPath = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("systemd/lookupd.service").path

    /// The unit names /usr/local/bin/lookupd; verify a copy naming the
    /// binary under test, so the check does not depend on an installation.
    func testUnitVerifies() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else {
            return XCTFail("systemd-analyze is missing (Debian package systemd; scripts/install-deps installs it)")
        }
        let unit = readText(Self.unitPath)
        XCTAssertTrue(unit.contains("ExecStart=/usr/local/bin/lookupd serve"), "unit's ExecStart changed")
        let copy = write("lookupd.service", unit.replacingOccurrences(of: "/usr/local/bin/lookupd", with: LookupdBinary.path!))
        let result = try runCommand("/usr/bin/systemd-analyze", ["verify", copy], folder: folder)
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertFalse(result.stderr.contains("lookupd.service"), "verify complained:\n\(result.stderr)")
    }

    func testUnitExposureIsAtMostTwo() throws {
        let result = try runCommand("/usr/bin/systemd-analyze", ["security", "--offline=yes", Self.unitPath], folder: folder)
        let text = result.stdout + result.stderr
        guard let range = text.range(of: #"Overall exposure level for lookupd\.service: ([0-9.]+)"#, options: .regularExpression),
              let score = Double(text[range].split(separator: " ").last!.trimmingCharacters(in: .whitespaces)) else {
            return XCTFail("no exposure score in:\n\(text)")
        }
        XCTAssertLessThanOrEqual(score, 2.0, text)
    }

    func testNotifyProtocol() throws {
        // The notify socket systemd would hold.
        let socketPath = path("systemd-notify.sock")
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in socketPath.utf8.enumerated() { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(bound, 0)
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))

        var messages: [String] = []
        func collect(until condition: ([String]) -> Bool, seconds: Double = 10) -> Bool {
            eventually(timeout: seconds) {
                var buffer = [UInt8](repeating: 0, count: 4096)
                let n = recv(fd, &buffer, buffer.count, 0)
                if n > 0 { messages.append(String(decoding: buffer[0..<n], as: UTF8.self)) }
                return condition(messages)
            }
        }

        let port = freeLoopbackPort()
        let config = write("notify.conf", configText(name: "notify", port: port, directories: ["main.lkd name=main"],
                                                     contacts: ["contacts.vcf"], extra: []))
        // WATCHDOG_USEC of 0.4 s: the daemon should ping every 0.2 s.
        let child = try ChildProcess(executable: LookupdBinary.path!, arguments: ["serve", "--config", config], folder: folder,
                                     name: "notify", environment: ["NOTIFY_SOCKET": socketPath, "WATCHDOG_USEC": "400000"])
        defer { child.stop() }

        XCTAssertTrue(collect(until: { $0.contains { $0.contains("READY=1") } }), "no READY=1: \(messages)\n\(child.stderr)")
        guard let ready = messages.first(where: { $0.contains("READY=1") }) else { return }
        XCTAssertTrue(ready.contains("STATUS="), ready)
        XCTAssertTrue(ready.contains("MAINPID=\(child.pid)"), ready)

        messages.removeAll()
        XCTAssertTrue(collect(until: { $0.filter { $0 == "WATCHDOG=1" }.count >= 3 }, seconds: 5), "watchdog pings: \(messages)")

        messages.removeAll()
        child.signal(SIGHUP)
        XCTAssertTrue(collect(until: { list in
            guard let reloading = list.firstIndex(where: { $0.contains("RELOADING=1") }) else { return false }
            return list[reloading...].contains { $0.contains("READY=1") }
        }), "no RELOADING=1 then READY=1 after SIGHUP: \(messages)")
        guard let reloading = messages.first(where: { $0.contains("RELOADING=1") }) else { return }
        let usec = reloading.split(separator: "\n").first { $0.hasPrefix("MONOTONIC_USEC=") }.flatMap { UInt64($0.dropFirst(15)) }
        XCTAssertNotNil(usec, reloading)
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nowUsec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        XCTAssertLessThanOrEqual(usec ?? .max, nowUsec)
        XCTAssertGreaterThan(usec ?? 0, nowUsec - 30_000_000, "MONOTONIC_USEC is not CLOCK_MONOTONIC")

        messages.removeAll()
        child.signal(SIGTERM)
        XCTAssertTrue(collect(until: { $0.contains { $0.contains("STOPPING=1") } }), "no STOPPING=1: \(messages)")
        XCTAssertTrue(child.wait(timeout: 5))
    }
}
