import Foundation
import Glibc
import XCTest

// Raw HTTP/1.1 over loopback, and curl, for the HTTP listener's tests.
// Like SIPWire.swift, independent of the daemon's own parser.

/// One HTTP response as read off the wire.
struct HTTPAnswer {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }

    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }

    /// Parses one response from the front of `bytes`; nil when incomplete.
    /// `head`: the response to a HEAD request (a Content-Length but no body).
    static func parse(_ bytes: [UInt8], head: Bool = false) -> (HTTPAnswer, Int)? {
        let crlf2: [UInt8] = [13, 10, 13, 10]
        guard bytes.count >= 4, let end = (0...(bytes.count - 4)).first(where: { Array(bytes[$0..<($0 + 4)]) == crlf2 }) else { return nil }
        let lines = String(decoding: bytes[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ", maxSplits: 2)
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]) else { return nil }
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        let length = head ? 0 : Int(headers.first { $0.0.lowercased() == "content-length" }?.1 ?? "0") ?? 0
        let total = end + 4 + length
        guard bytes.count >= total else { return nil }
        return (HTTPAnswer(status: status, headers: headers, body: Array(bytes[(end + 4)..<total])), total)
    }
}

/// A TCP connection to the HTTP listener, from a loopback address.
final class HTTPConnectionPeer {
    let fd: Int32
    private var buffer: [UInt8] = []
    private(set) var closedByPeer = false

    init(port: UInt16, from ip: String = "127.0.0.1") throws {
        fd = try connectLoopback(to: port, from: ip)
    }

    private var open = true

    deinit { disconnect() }

    func disconnect() {
        if open { close(fd) }
        open = false
    }

    func send(_ text: String) { send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }  // the daemon may close early on a bad request: what it answered is checked
            offset += n
        }
    }

    /// Reads until `count` responses are complete, the peer closes, or `timeout` passes.
    func responses(_ count: Int, head: Bool = false, timeout: Double = 5) -> [HTTPAnswer] {
        var answers: [HTTPAnswer] = []
        let deadline = monotonicSeconds() + timeout
        while answers.count < count {
            if let (answer, used) = HTTPAnswer.parse(buffer, head: head) {
                answers.append(answer)
                buffer.removeFirst(used)
                continue
            }
            if closedByPeer || !fill(until: deadline) { break }
        }
        return answers
    }

    func response(head: Bool = false, timeout: Double = 5) -> HTTPAnswer? { responses(1, head: head, timeout: timeout).first }

    /// True when the daemon closes the connection (read returns 0 or a reset) within `timeout`.
    func closes(timeout: Double = 5) -> Bool {
        let deadline = monotonicSeconds() + timeout
        while !closedByPeer {
            if !fill(until: deadline) { return closedByPeer }
        }
        return true
    }

    /// Reads what arrives before `deadline`; false on timeout.
    private func fill(until deadline: Double) -> Bool {
        while true {
            let left = deadline - monotonicSeconds()
            if left <= 0 { return false }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(max(1, left * 1000)))
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { return false }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { buffer.append(contentsOf: chunk[0..<n]); return true }
            if n < 0 && errno == EINTR { continue }
            closedByPeer = true
            return true
        }
    }
}

extension DaemonTestCase {
    /// A daemon with `http-listen` on a free loopback port; returns it and the HTTP port.
    func startHTTPDaemon(_ extra: [String] = [], name: String = "lookupd", directories: [String] = ["main.lkd name=main"],
                         file: StaticString = #filePath, line: UInt = #line) throws -> (LookupdDaemon, UInt16) {
        var lastError: Error?
        for _ in 0..<3 {
            let httpPort = freeLoopbackPort()
            do {
                let daemon = try startDaemon(["http-listen = 127.0.0.1:\(httpPort)"] + extra, name: name, directories: directories,
                                             file: file, line: line)
                return (daemon, httpPort)
            } catch {
                lastError = error
            }
        }
        throw lastError ?? HarnessError.failed("daemon with http-listen did not start")
    }

    /// `curl -s URL`: the status code and the body.
    func curl(_ url: String, _ options: [String] = []) throws -> (status: Int, body: String) {
        let marker = "\n--curl-status:"
        let result = try runCommand("/usr/bin/curl", ["-sS", "--max-time", "10", "-w", marker + "%{http_code}"] + options + [url],
                                    folder: folder, timeout: 20)
        XCTAssertEqual(result.status, 0, "curl \(url): \(result.summary)")
        guard let range = result.stdout.range(of: marker, options: .backwards) else { return (0, result.stdout) }
        return (Int(result.stdout[range.upperBound...]) ?? 0, String(result.stdout[..<range.lowerBound]))
    }

    /// Scrapes /metrics with curl.
    func scrape(_ port: UInt16, file: StaticString = #filePath, line: UInt = #line) throws -> Stats {
        let (status, body) = try curl("http://127.0.0.1:\(port)/metrics")
        XCTAssertEqual(status, 200, "GET /metrics: \(body)", file: file, line: line)
        return Stats(body)
    }
}
