import XCTest
@testable import Configuration

/// Issue 17, item 8: `redirect-target` is read as the URI a 302's Contact carries, and
/// refused with its line when a UA could not follow it.
final class RedirectTargetConfigTests: XCTestCase {
    func error(_ text: String, line: UInt = #line) -> String? {
        do {
            _ = try ConfigParser.parse(text, path: "/etc/lookupd/lookupd.conf")
            XCTFail("parsed without error", line: line)
            return nil
        } catch {
            return error.description
        }
    }

    func testTargetsAccepted() throws {
        for (text, scheme, host) in [("sip:pbx.example.net;transport=udp", "sip", "pbx.example.net;transport=udp"),
                                     ("SIP:192.0.2.7:5070", "sip", "192.0.2.7:5070"),
                                     ("sips:[2001:db8::1]:5061;maddr=x", "sips", "[2001:db8::1]:5061;maddr=x")] {
            let target = try XCTUnwrap(try ConfigParser.parse("redirect-target = \(text)\n", path: "/l.conf").treatment.redirectTarget, text)
            XCTAssertEqual(target.scheme, scheme)
            XCTAssertEqual(target.host, host)
            XCTAssertNil(target.user)
        }
        XCTAssertNil(try ConfigParser.parse("", path: "/l.conf").treatment.redirectTarget)
    }

    func testBadTargetsAreRefusedWithTheirLine() {
        let cases: [(String, String)] = [
            ("tel:+18005550100", "expected a sip: or sips: URI such as sip:pbx.example.net;transport=udp, not a tel: URI"),
            ("pbx.example.net", "expected a sip: or sips: URI such as sip:pbx.example.net;transport=udp"),
            ("sip:1001@pbx.example.net", "give the host only (sip:pbx.example.net): the 302 keeps the Request-URI's user"),
            ("sip:pbx.example.net?Subject=x", "a redirect URI takes no ?headers"),
            ("sip:pbx example.net", "' ' has no place in a SIP URI (escape it as %XX)"),
            ("sip:<pbx>", "'<' has no place in a SIP URI (escape it as %XX)"),
            ("sip:pbx.example.net:0", "expected a port from 1 to 65535, got '0'"),
            ("sip:pbx.example.net:99999", "expected a port from 1 to 65535, got '99999'"),
            ("sip:;transport=udp", "expected a sip: or sips: URI such as sip:pbx.example.net;transport=udp: no host in 'sip:;transport=udp'"),
            ("sip:[2001:db8::1", "expected an IPv6 address between [ and ]"),
            ("sip:pbx.example.net;lookupd=0123456789abcdef", "the lookupd= parameter is lookupd's own redirect mark"),
        ]
        for (value, message) in cases {
            XCTAssertEqual(error("log-level = info\nredirect-target = \(value)\n"), "/etc/lookupd/lookupd.conf:2: redirect-target: " + message, value)
        }
        XCTAssertEqual(error("mode = proxy\nupstream = 192.0.2.1:5060\nredirect-target = sip:pbx.example.net\n"),
                       "/etc/lookupd/lookupd.conf:3: 'redirect-target' only applies to mode = redirect (a proxy forwards calls to its upstream)")
    }
}

/// Issue 17, item 4: `block-treatment`, for the policies and per directory.
final class BlockTreatmentConfigTests: XCTestCase {
    func testTreatmentsAccepted() throws {
        let c = try ConfigParser.parse("""
            block-treatment = reject 604
            directory = a.lkd block-treatment="redirect sip:spam@pbx.example.net"
            directory = b.lkd block-treatment=reject
            directory = c.lkd block-response=607

            """, path: "/l.conf")
        XCTAssertEqual(c.treatment.blockTreatment, .rejectWith(604))
        XCTAssertEqual(c.directories.map(\.blockTreatment), [.redirect(try SIPTargetURI.parse("sip:spam@pbx.example.net")), .reject, nil])
        XCTAssertEqual(try ConfigParser.parse("", path: "/l.conf").treatment.blockTreatment, .reject)
    }

    func testBadTreatmentsAreRefusedWithTheirLine() {
        func error(_ text: String) -> String {
            do { _ = try ConfigParser.parse("log-level = info\n" + text + "\n", path: "/l.conf"); return "parsed" } catch { return error.description }
        }
        XCTAssertEqual(error("block-treatment = reject 500"),
                       "/l.conf:2: block-treatment: reject takes 404, 410, 486, 600, 603, 604, 606, 607 or 608, not '500'")
        XCTAssertEqual(error("block-treatment = reject 302"),
                       "/l.conf:2: block-treatment: reject takes 404, 410, 486, 600, 603, 604, 606, 607 or 608, not '302'")
        XCTAssertEqual(error("block-treatment = drop"),
                       "/l.conf:2: block-treatment: expected reject, reject CODE or redirect URI (e.g. redirect sip:announcement@pbx.example.net)")
        XCTAssertEqual(error("block-treatment = redirect"),
                       "/l.conf:2: block-treatment: expected reject, reject CODE or redirect URI (e.g. redirect sip:announcement@pbx.example.net)")
        XCTAssertEqual(error("block-treatment = redirect https://example.net/"),
                       "/l.conf:2: block-treatment: expected a sip: or sips: URI such as sip:pbx.example.net;transport=udp, not a https: URI")
        XCTAssertEqual(error("block-treatment = redirect sip:spam@pbx?x=1"), "/l.conf:2: block-treatment: a redirect URI takes no ?headers")
        XCTAssertEqual(error("directory = a.lkd block-treatment=\"reject 499\""),
                       "/l.conf:2: directory: reject takes 404, 410, 486, 600, 603, 604, 606, 607 or 608, not '499'")
        XCTAssertEqual(error("directory = a.lkd block-response=607 block-treatment=reject"),
                       "/l.conf:2: directory: give block-response= or block-treatment=, not both")
    }
}
