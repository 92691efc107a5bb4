import Addresses
import XCTest
@testable import Configuration

/// The proxy mode keys of lookupd.conf (ProxyKeys.swift).
final class ProxyConfigTests: XCTestCase {
    let path = "/etc/lookupd/lookupd.conf"

    func error(_ text: String, line: UInt = #line) -> String {
        do {
            _ = try ConfigParser.parse(text, path: path)
            XCTFail("parsed without error", line: line)
            return ""
        } catch {
            return error.description
        }
    }

    func testProxyKeys() throws {
        let config = try ConfigParser.parse("""
        mode = proxy
        upstream = 192.0.2.20:5070;transport=TCP
        label-format = "[{label}] {name}"
        label-in-asserted-identity = yes
        upstream-probe-interval = 5
        """, path: path)
        XCTAssertEqual(config.mode, .proxy)
        XCTAssertEqual(config.proxy.upstream, UpstreamAddress(host: IPAddress("192.0.2.20")!, port: 5070, transport: .tcp))
        XCTAssertEqual(config.proxy.labelFormat.parts, [.text("["), .label, .text("] "), .name])
        XCTAssertTrue(config.proxy.labelInAssertedIdentity)
        XCTAssertEqual(config.proxy.probeInterval, 5)

        let defaults = try ConfigParser.parse("mode = proxy\nupstream = [2001:db8::20]:5060\n", path: path)
        XCTAssertEqual(defaults.proxy.upstream?.transport, .udp)
        XCTAssertEqual(defaults.proxy.upstream?.description, "[2001:db8::20]:5060;transport=udp")
        XCTAssertEqual(defaults.proxy.labelFormat, .labelOnly)
        XCTAssertFalse(defaults.proxy.labelInAssertedIdentity)
        XCTAssertEqual(defaults.proxy.probeInterval, 0)
    }

    func testErrorsNameTheLine() {
        XCTAssertEqual(error("mode = proxy\n"), "\(path):1: mode = proxy needs an 'upstream = HOST:PORT' line")
        XCTAssertEqual(error("listen = udp:127.0.0.1:5060\nupstream = 192.0.2.20:5060\n"), "\(path):2: 'upstream' only applies to mode = proxy")
        for bad in ["pbx.example:5060", "192.0.2.20", "192.0.2.20:0", "192.0.2.20:5060;transport=tls", "2001:db8::1:5060"] {
            XCTAssertTrue(error("mode = proxy\nupstream = \(bad)\n").hasPrefix("\(path):2: upstream: expected HOST:PORT"), bad)
        }
        for bad in ["{name}", "{label} {name", "{label} {nmae}", "no label", "{label}\u{7}"] {
            XCTAssertTrue(error("mode = proxy\nupstream = 192.0.2.20:5060\nlabel-format = \(bad)\n").hasPrefix("\(path):3: label-format: expected text with {label}"), bad)
        }
        XCTAssertTrue(error("mode = proxy\nupstream = 192.0.2.20:5060\nlabel-in-asserted-identity = maybe\n").contains("expected yes or no"))
        XCTAssertTrue(error("mode = proxy\nupstream = 192.0.2.20:5060\nupstream-probe-interval = -1\n").contains("expected seconds from 0 to 3600"))
        XCTAssertTrue(error("mode = relay\n").contains("mode: expected redirect or proxy"))
        XCTAssertTrue(error("mode = proxy\nudp-steering = spread\nupstream = 192.0.2.20:5060\n").hasPrefix("\(path):2: udp-steering = spread needs mode = redirect"))
    }

    /// udp-steering: flow by default in both modes; spread only where answers are stateless.
    func testUDPSteering() throws {
        XCTAssertEqual(try ConfigParser.parse("mode = proxy\nupstream = 192.0.2.20:5060\n", path: path).udpSteering, .flow)
        XCTAssertEqual(try ConfigParser.parse("mode = proxy\nupstream = 192.0.2.20:5060\nudp-steering = flow\n", path: path).udpSteering, .flow)
        XCTAssertEqual(try ConfigParser.parse("", path: path).udpSteering, .flow)
        XCTAssertEqual(try ConfigParser.parse("udp-steering = spread\n", path: path).udpSteering, .spread)
    }

    /// Every worker binds every listen address: one given twice is an error naming both lines,
    /// while one port over UDP and TCP, or over IPv4 and IPv6, is two addresses.
    func testDuplicateListenAddressNamesTheLines() throws {
        XCTAssertEqual(error("listen = udp:127.0.0.1:5060\nlisten = tcp:127.0.0.1:5060\nlisten = udp:127.0.0.1:5060\n"),
                       "\(path):3: listen: udp:127.0.0.1:5060 is already listed on line 1")
        XCTAssertEqual(error("listen = udp:[::1]:5060\n# same\nlisten = udp:[0:0::1]:5060\n"), "\(path):3: listen: udp:[::1]:5060 is already listed on line 1")
        let config = try ConfigParser.parse("listen = udp:127.0.0.1:5060\nlisten = tcp:127.0.0.1:5060\nlisten = udp:[::1]:5060\n", path: path)
        XCTAssertEqual(config.listen.count, 3)
    }
}
