import Addresses
import Foundation
import Loading
import TextFormats
import XCTest
@testable import Configuration
@testable import Directory
@testable import Screening

/// lookupd.conf: every key, every kind of error with its file:line, paths,
/// comments and quoting.
final class ConfigurationTests: XCTestCase {
    func parse(_ text: String, path: String = "/etc/lookupd/lookupd.conf") throws -> LookupdConfig {
        try ConfigParser.parse(text, path: path)
    }

    /// The error a config text must produce.
    func error(_ text: String, path: String = "/etc/lookupd/lookupd.conf", line: UInt = #line) -> String? {
        do {
            _ = try ConfigParser.parse(text, path: path)
            XCTFail("parsed without error", line: line)
            return nil
        } catch {
            return error.description
        }
    }

    func testDefaults() throws {
        let c = try parse("")
        XCTAssertEqual(c.path, "/etc/lookupd/lookupd.conf")
        XCTAssertEqual(c.plan, .china)
        XCTAssertEqual(c.directories, [])
        XCTAssertEqual(c.contacts, [])
        XCTAssertEqual(c.listen, [])
        XCTAssertEqual(c.mode, .redirect)
        XCTAssertNil(c.workers)
        XCTAssertNil(c.allowFrom)
        XCTAssertEqual(c.refusalAction, .reject)
        XCTAssertEqual(c.trustAssertedIdentityFrom, [])
        XCTAssertEqual(c.blockResponse, .decline)
        XCTAssertEqual(c.unknownResponse, .redirect)
        XCTAssertEqual(c.labelHeader, "X-Caller-Label")
        XCTAssertEqual(c.maxMessageSize, 16384)
        XCTAssertEqual(c.controlSocket, "/run/lookupd/control.sock")
        XCTAssertEqual(c.stateDirectory, "/var/lib/lookupd")
        XCTAssertEqual(c.logLevel, .info)
        XCTAssertEqual(c.tcpMaxConnections, 4096)
        XCTAssertEqual(c.tcpIdleTimeout, 120)
        // Operations: no HTTP listener, key=value lines, no log file.
        XCTAssertEqual(c.operations, OperationsConfig())
        XCTAssertNil(c.operations.httpListen)
        XCTAssertEqual(c.operations.logFormat, .text)
        XCTAssertFalse(c.operations.logUnknown)
        XCTAssertNil(c.operations.logFile)
        XCTAssertEqual(c.operations.logFileMaxSize, 10 << 20)
        XCTAssertEqual(c.operations.logFileKeep, 5)
    }

    func testEveryKeyParses() throws {
        let text = """
        directory = /srv/lookupd/operator.lkd name=operator block-response=608
        directory = community.lkd
        contacts = contacts.vcf
        contacts = /srv/lookupd/vip.csv
        country = GB
        country-code = 44
        national-prefix = 9
        international-prefix = 00
        national-number-length = 9-10
        attribution = en
        attribution-carriers = /srv/carrierdata
        unknown-label = attribution
        listen = udp:0.0.0.0:5060
        listen = tcp:[::1]:5070
        mode = proxy
        upstream = 192.0.2.20:5060;transport=tcp
        label-format = "{label} ({name})"
        label-in-asserted-identity = yes
        upstream-probe-interval = 10
        workers = 4
        allow-from = 192.0.2.0/24, 2001:db8::/32
        allow-from = 198.51.100.7
        refuse-action = drop
        trust-asserted-identity-from = 10.0.0.0/8 10.1.0.0/16
        identity-order = rpid, pai, from
        block-response = 603+
        redress = url=https://redress.example.net/ tel=+18005550100 email=redress@example.net location=RLN
        redress-jcard = https://example.net/jcard.jws
        label-to-caller = yes
        redress-q850 = yes
        unknown-response = 404
        label-header = X-Spam-Label
        label-escapes = replace
        max-message-size = 65507
        control-socket = run/control.sock
        state-directory = /var/lib/lookupd-test
        directory-copy = yes
        log-level = debug
        tcp-max-connections = 100
        tcp-idle-timeout = 30
        contacts-dir = callees
        blocks-dir = callee-blocks
        anonymous-callers = label "Withheld Number" active=22:00-07:00
        invalid-callers = block
        bypass = 110, 119, 8*
        bypass = +861012345678
        verstat-failed = block
        verstat-no-validation = label
        verstat-failed-contacts = ignore
        time-zone = UTC
        feed = spamco https://feeds.example/spam.csv.gz into=spam.lkd max-shrink=20
        http-listen = [::1]:9180
        http-allow-from = 127.0.0.1, ::1
        http-max-connections = 32
        http-write-token-file = write.token
        http-write-allow-from = 192.0.2.10, 2001:db8::/32
        log-format = json
        log-unknown = yes
        log-file = log/decisions.log
        log-file-max-size = 64K
        log-file-keep = 0
        replicate = etcd http://10.0.0.1:2379,http://10.0.0.2:2379 node=node-a
        """
        let c = try parse(text)
        XCTAssertEqual(c.directories, [DirectoryConfig(path: "/srv/lookupd/operator.lkd", name: "operator", blockResponse: .rejected),
                                       DirectoryConfig(path: "/etc/lookupd/community.lkd", name: "community.lkd")])
        XCTAssertEqual(c.contacts, ["/etc/lookupd/contacts.vcf", "/srv/lookupd/vip.csv"])
        XCTAssertEqual(c.plan, try NumberingPlan(region: "GB", nationalPrefix: "9", nationalNumberLength: 9...10))
        XCTAssertEqual(c.plan.nationalPrefixOverride, [9])
        XCTAssertNil(c.plan.internationalPrefixOverride, "00 is GB's own exit prefix: no override")
        XCTAssertEqual(c.attribution, "en")
        XCTAssertEqual(c.attributionCarriers, "/srv/carrierdata")
        XCTAssertEqual(c.policies.unknownLabel, .attribution)
        XCTAssertEqual(c.listen.map(\.description), ["udp:0.0.0.0:5060", "tcp:[::1]:5070"])
        XCTAssertEqual(c.mode, .proxy)
        XCTAssertEqual(c.proxy.upstream?.description, "192.0.2.20:5060;transport=tcp")
        XCTAssertEqual(c.proxy.labelFormat.parts, [.label, .text(" ("), .name, .text(")")])
        XCTAssertTrue(c.proxy.labelInAssertedIdentity)
        XCTAssertEqual(c.proxy.probeInterval, 10)
        XCTAssertEqual(c.workers, 4)
        XCTAssertEqual(c.allowFrom?.map(\.description), ["192.0.2.0/24", "2001:db8::/32", "198.51.100.7/32"])
        XCTAssertEqual(c.refusalAction, .drop)
        XCTAssertEqual(c.trustAssertedIdentityFrom.map(\.description), ["10.0.0.0/8", "10.1.0.0/16"])
        XCTAssertEqual(c.blockResponse, .networkBlocked)
        XCTAssertEqual(c.blockResponse.code, 603)
        XCTAssertEqual(c.blockResponse.reasonPhrase, "Network Blocked")
        XCTAssertEqual(c.treatment.redress, Redress(url: "https://redress.example.net/", tel: "+18005550100",
                                                    email: "redress@example.net", location: .remoteNetwork))
        XCTAssertEqual(c.treatment.jcardURL, "https://example.net/jcard.jws")
        XCTAssertTrue(c.treatment.labelToCaller)
        XCTAssertTrue(c.treatment.redressQ850)
        XCTAssertEqual(c.identityOrder, [.rpid, .pai, .from])
        XCTAssertFalse(c.treatment.anonymousRejection433)
        XCTAssertEqual(c.unknownResponse, .notFound)
        XCTAssertEqual(c.labelHeader, "X-Spam-Label")
        XCTAssertEqual(c.labelEscapes, .replace)
        XCTAssertEqual(c.maxMessageSize, 65507)
        XCTAssertEqual(c.controlSocket, "/etc/lookupd/run/control.sock")
        XCTAssertEqual(c.stateDirectory, "/var/lib/lookupd-test")
        XCTAssertEqual(c.logLevel, .debug)
        XCTAssertEqual(c.tcpMaxConnections, 100)
        XCTAssertEqual(c.tcpIdleTimeout, 30)
        XCTAssertEqual(c.blocksDirectory.map { $0.hasSuffix("callee-blocks") }, true)
        XCTAssertEqual(c.operations.httpListen?.description, "tcp:[::1]:9180")
        XCTAssertEqual(c.operations.httpAllowFrom?.map(\.description), ["127.0.0.1/32", "::1/128"])
        XCTAssertEqual(c.operations.httpMaxConnections, 32)
        XCTAssertEqual(c.operations.httpWriteTokenFile, "/etc/lookupd/write.token")
        XCTAssertEqual(c.operations.httpWriteAllowFrom?.map(\.description), ["192.0.2.10/32", "2001:db8::/32"])
        XCTAssertEqual(c.operations.logFormat, .json)
        XCTAssertTrue(c.operations.logUnknown)
        XCTAssertEqual(c.operations.logFile, "/etc/lookupd/log/decisions.log")
        XCTAssertEqual(c.operations.logFileMaxSize, 65536)
        XCTAssertEqual(c.operations.logFileKeep, 0)
        XCTAssertTrue(c.directoryCopy)
        XCTAssertFalse(try parse("").directoryCopy, "no copy unless asked")
        XCTAssertEqual(c.replication?.endpoints, ["http://10.0.0.1:2379", "http://10.0.0.2:2379"])
        XCTAssertEqual(c.replication?.node, "node-a")
        // The keys of redirect mode only (the text above is a proxy's), and block-treatment,
        // which would take the place of the 603+ above.
        let redirectOnly = "\nredirect-target = sip:pbx.example.net;transport=udp\nblock-treatment = reject 486\nudp-steering = spread\n"
        XCTAssertEqual(try parse(redirectOnly).udpSteering, .spread)
        XCTAssertEqual(try parse(redirectOnly).treatment.redirectTarget?.text, "sip:pbx.example.net;transport=udp")
        XCTAssertEqual(try parse(redirectOnly).treatment.blockTreatment, .rejectWith(486))
        // Every key the parser knows appears in this test.
        for key in ConfigParser.keys {
            XCTAssertTrue((text + redirectOnly).contains("\n\(key.name) =") || text.hasPrefix("\(key.name) ="), "key \(key.name) not covered")
        }
    }

    func testOtherAcceptedValues() throws {
        XCTAssertNil(try parse("workers = auto").workers)
        XCTAssertEqual(try parse("log-level = WARN").logLevel, .warning)
        XCTAssertEqual(try parse("log-level = err").logLevel, .error)
        XCTAssertEqual(try parse("refuse-action = 403").refusalAction, .reject)
        XCTAssertEqual(try parse("unknown-response = 503").unknownResponse.code, 503)
        XCTAssertEqual(try parse("block-response = 607").blockResponse.reasonPhrase, "Unwanted")
        XCTAssertNil(try parse("national-prefix = \"\"").plan.nationalPrefix)
        XCTAssertEqual(try parse("national-prefix = \"\"").plan.nationalPrefixOverride, [])
        XCTAssertEqual(try parse("national-number-length = 10").plan.nationalNumberLength, 10...10)
        // The US by the old keys: the same plan as country = US with the same prefixes.
        let us = try parse("country-code = 1\nnational-prefix = 1\ninternational-prefix = 011").plan
        XCTAssertEqual(us.region, "US")
        XCTAssertNil(us.nationalNumberLength)
        XCTAssertEqual(NumberNormalizer(plan: us).normalize("1 212 555 0100").number?.description, "+12125550100")
        // country = US alone: libphonenumber's trunk prefix 1 and exit prefix 011.
        let region = try parse("country = us").plan
        XCTAssertEqual(region, try NumberingPlan(region: "US"))
        XCTAssertFalse(region.isDefault)
        XCTAssertEqual(region.nationalPrefix, "1")
        XCTAssertEqual(region.internationalPrefix, "011")
        XCTAssertTrue(try parse("workers = 2").plan.isDefault, "no plan key: the announced default")
        XCTAssertEqual(try parse("attribution = zh").attribution, "zh")
        XCTAssertNil(try parse("attribution = off").attribution)
        XCTAssertEqual(try parse("attribution = en\nunknown-label = attribution").policies.unknownLabel, .attribution)
        XCTAssertNil(try parse("attribution-carriers = none").attributionCarriers)
        XCTAssertEqual(try parse("attribution-carriers = carriers").attributionCarriers, "/etc/lookupd/carriers")
    }

    /// D17: a listener beyond loopback needs its sources named (allow-from, or any on
    /// purpose); the HTTP listener inherits allow-from's list but not an `any`.
    func testListenersBeyondLoopbackNeedTheirSourcesNamed() throws {
        func problem(_ lines: String) throws -> String? { try parse(lines + "\n").exposureProblem }
        XCTAssertNil(try problem("listen = udp:127.0.0.1:5060\nlisten = tcp:[::1]:5060"), "loopback only")
        XCTAssertTrue(try problem("listen = udp:0.0.0.0:5060")?.contains("allow-from is not set") ?? false)
        XCTAssertTrue(try problem("listen = tcp:[::]:5060")?.contains("allow-from is not set") ?? false)
        XCTAssertTrue(try problem("listen = udp:192.0.2.5:5060")?.hasPrefix("listen = udp:192.0.2.5:5060 is reachable beyond this machine") ?? false)
        XCTAssertNil(try problem("listen = udp:0.0.0.0:5060\nallow-from = 192.0.2.10"))
        XCTAssertNil(try problem("listen = udp:0.0.0.0:5060\nallow-from = any"))
        // HTTP: inherits a list, not an any.
        XCTAssertNil(try problem("listen = udp:127.0.0.1:5060\nhttp-listen = 127.0.0.1:9180"))
        XCTAssertTrue(try problem("listen = udp:127.0.0.1:5060\nhttp-listen = 0.0.0.0:9180")?.contains("set http-allow-from") ?? false)
        XCTAssertNil(try problem("listen = udp:127.0.0.1:5060\nhttp-listen = 0.0.0.0:9180\nallow-from = 192.0.2.0/24"))
        XCTAssertTrue(try problem("listen = udp:0.0.0.0:5060\nallow-from = any\nhttp-listen = [::]:9180")?.contains("http-listen = [::]:9180") ?? false)
        XCTAssertNil(try problem("listen = udp:0.0.0.0:5060\nallow-from = any\nhttp-listen = 0.0.0.0:9180\nhttp-allow-from = any"))
        let any = try parse("listen = udp:0.0.0.0:5060\nallow-from = any\nhttp-listen = 0.0.0.0:9180\nhttp-allow-from = any\n")
        XCTAssertTrue(any.allowFromAny)
        XCTAssertEqual(any.exposureWarnings.count, 2, "\(any.exposureWarnings)")
        XCTAssertEqual(try parse("listen = udp:0.0.0.0:5060\nallow-from = 192.0.2.10\n").exposureWarnings, [])
        XCTAssertThrowsError(try parse("trust-asserted-identity-from = any\n"), "any is never a trusted identity source")
    }

    func testUnknownKeySuggestsTheNearestOne() {
        XCTAssertEqual(error("# comment\n\ndirectroy = a.lkd\n"),
                       "/etc/lookupd/lookupd.conf:3: unknown key 'directroy' (did you mean 'directory'?)")
        XCTAssertEqual(error("contact = a.vcf"), "/etc/lookupd/lookupd.conf:1: unknown key 'contact' (did you mean 'contacts'?)")
        XCTAssertEqual(error("log_level = info"), "/etc/lookupd/lookupd.conf:1: unknown key 'log_level' (did you mean 'log-level'?)")
        XCTAssertEqual(error("frobnicate = yes"), "/etc/lookupd/lookupd.conf:1: unknown key 'frobnicate'")
        XCTAssertEqual(error("Directory = a.lkd"), "/etc/lookupd/lookupd.conf:1: unknown key 'Directory' (did you mean 'directory'?)")
    }

    func testRepeatedSingleKey() {
        XCTAssertEqual(error("country-code = 86\nworkers = 2\ncountry-code = 44\n"),
                       "/etc/lookupd/lookupd.conf:3: 'country-code' is already set on line 1; it may appear once")
        XCTAssertEqual(error("workers = 2\n\n# again\nworkers = 2\n"),
                       "/etc/lookupd/lookupd.conf:4: 'workers' is already set on line 1; it may appear once")
    }

    /// Issue 17: 603+ needs a redress contact; the error names the line that asks for 603+.
    func testNetworkBlockedNeedsRedress() throws {
        XCTAssertEqual(error("log-level = info\nblock-response = 603+\n"),
                       "/etc/lookupd/lookupd.conf:2: 603+ needs a 'redress = url=... | tel=... | email=... location=...' line (ATIS-1000099 asks for a redress contact)")
        XCTAssertTrue(error("directory = a.lkd\ndirectory = b.lkd block-response=603+\nblock-response = 603+\n")?
            .hasPrefix("/etc/lookupd/lookupd.conf:2: 603+ needs a 'redress") ?? false)
        XCTAssertNil(try parse("block-response = 603+\nredress = tel=+18005550100 location=RPN\n").treatment.redress?.url)
        XCTAssertEqual(try parse("redress = location=RLN email=a@example.net\nblock-response = 603+\n").treatment.redress?.email, "a@example.net")
        let cases: [(String, String)] = [
            ("redress = location=RLN", "redress: give at least one of url=, tel= and email="),
            ("redress = tel=+18005550100", "redress: location= is required (RLN for a carrier serving the callee, RPN for the callee's PBX)"),
            ("redress = tel=+18005550100 location=XX", "redress: location= must be LN, TN, LPN, RPN or RLN"),
            ("redress = url=http://example.net location=RLN", "redress: url=: expected an https:// URL"),
            ("redress = url=https://example.net/\"x location=RLN", "redress: unterminated quote"),
            ("redress = url=https://example.net/a;id=forged location=RLN", "redress: url=: ';' cannot be carried in a Reason text (percent-encode it)"),
            ("redress = url=\"https://example.net/a b\" location=RLN", "redress: url=: only printable ASCII, without spaces (percent-encode the rest)"),
            ("redress = url=https://example.net/\\ location=RLN", "redress: url=: '\\' cannot be carried in a Reason text (percent-encode it)"),
            ("redress = url=https://exämple.net location=RLN", "redress: url=: only printable ASCII, without spaces (percent-encode the rest)"),
            ("redress = tel=18005550100 location=RLN", "redress: tel=: expected an E.164 number (+ and 1 to 15 digits, e.g. +18005550100)"),
            ("redress = tel=+1800555010012345 location=RLN", "redress: tel=: expected an E.164 number (+ and 1 to 15 digits, e.g. +18005550100)"),
            ("redress = email=nobody location=RLN", "redress: email=: expected an address such as redress@example.net"),
            ("redress = email=a@b@example.net location=RLN", "redress: email=: expected an address such as redress@example.net"),
            ("redress = tel=+1 tel=+2 location=RLN", "redress: tel= given twice"),
            ("redress = fax=+18005550100 location=RLN", "redress: unknown redress option 'fax' (expected url=, tel=, email= or location=)"),
            ("redress-jcard = http://example.net/j", "redress-jcard: expected an https:// URL"),
            ("anonymous-callers = reject 403", "anonymous-callers: reject takes 433 (Anonymity Disallowed, RFC 5079)"),
            ("anonymous-callers = reject", "anonymous-callers: reject takes 433 (Anonymity Disallowed, RFC 5079)"),
            ("label-to-caller = maybe", "label-to-caller: expected yes or no"),
        ]
        for (text, message) in cases {
            XCTAssertEqual(error(text + "\n"), "/etc/lookupd/lookupd.conf:1: " + message, text)
        }
        let anonymous = try parse("anonymous-callers = reject 433 active=22:00-07:00\n")
        XCTAssertTrue(anonymous.treatment.anonymousRejection433)
        XCTAssertEqual(anonymous.policies.anonymous.action, .block)
        XCTAssertNotNil(anonymous.policies.anonymous.active)
        XCTAssertFalse(try parse("anonymous-callers = block\n").treatment.anonymousRejection433)
    }

    func testBadValues() {
        let cases: [(String, String)] = [
            ("country-code = 0", "country-code: expected 1 to 3 digits without a leading zero"),
            ("country-code = 086", "country-code: expected 1 to 3 digits without a leading zero"),
            ("country-code = 1000", "country-code: expected 1 to 3 digits without a leading zero"),
            ("country-code = 8 6", "country-code: expected 1 to 3 digits without a leading zero"),
            ("national-number-length = 11-10", "national-number-length: expected MIN or MIN-MAX, e.g. 10-11"),
            ("national-number-length = ten", "national-number-length: expected MIN or MIN-MAX, e.g. 10-11"),
            ("national-number-length = 1-2-3", "national-number-length: expected MIN or MIN-MAX, e.g. 10-11"),
            ("listen = 0.0.0.0:5060", "listen: expected udp:HOST:PORT or tcp:HOST:PORT (IPv6 in brackets)"),
            ("listen = udp:::1:5060", "listen: expected udp:HOST:PORT or tcp:HOST:PORT (IPv6 in brackets)"),
            ("listen = udp:0.0.0.0:0", "listen: expected udp:HOST:PORT or tcp:HOST:PORT (IPv6 in brackets)"),
            ("listen = udp:0.0.0.0:70000", "listen: expected udp:HOST:PORT or tcp:HOST:PORT (IPv6 in brackets)"),
            ("listen = sctp:0.0.0.0:5060", "listen: expected udp:HOST:PORT or tcp:HOST:PORT (IPv6 in brackets)"),
            ("listen = udp:pbx.example.com:5060", "listen: expected udp:HOST:PORT or tcp:HOST:PORT (IPv6 in brackets)"),
            ("mode = relay", "mode: expected redirect or proxy"),
            ("workers = 0", "workers: expected auto or a number from 1 to 256"),
            ("workers = 257", "workers: expected auto or a number from 1 to 256"),
            ("workers = many", "workers: expected auto or a number from 1 to 256"),
            ("udp-steering = random", "udp-steering: expected flow or spread"),
            ("allow-from = 192.0.2.0/33", "allow-from: '192.0.2.0/33' is not an address or address block (e.g. 192.0.2.0/24, ::1)"),
            ("allow-from = localhost", "allow-from: 'localhost' is not an address or address block (e.g. 192.0.2.0/24, ::1)"),
            ("allow-from = ,", "allow-from: expected at least one address block"),
            ("refuse-action = 404", "refuse-action: expected 403 or drop"),
            ("identity-order = pai,ppi", "identity-order: from must come last (the caller of a request without the others)"),
            ("trust-asserted-identity-from = 10.0.0.0/8/8", "trust-asserted-identity-from: '10.0.0.0/8/8' is not an address or address block (e.g. 192.0.2.0/24, ::1)"),
            ("block-response = 486", "block-response: expected 603, 607, 608 or 603+"),
            ("unknown-response = 200", "unknown-response: expected 302, 404 or 503"),
            ("label-header = X Caller", "label-header: expected a header name (letters, digits, '-', at most 64 characters)"),
            ("label-header = \(String(repeating: "X", count: 65))", "label-header: expected a header name (letters, digits, '-', at most 64 characters)"),
            ("max-message-size = 1023", "max-message-size: expected a number from 1024 to 65507"),
            ("max-message-size = 65508", "max-message-size: expected a number from 1024 to 65507"),
            ("control-socket = \(String(repeating: "s", count: 100))", "control-socket: expected a path shorter than 100 bytes"),
            ("state-directory = ", "state-directory: expected a path"),
            ("contacts = ", "contacts: expected a path"),
            ("directory = ", "directory: expected a path"),
            ("log-level = verbose", "log-level: expected error, warning, notice, info or debug"),
            ("tcp-max-connections = 0", "tcp-max-connections: expected a number from 1 to 1000000"),
            ("tcp-idle-timeout = 86401", "tcp-idle-timeout: expected seconds from 1 to 86400"),
            ("directory = a.lkd name=", "directory: name= needs a value"),
            ("directory = a.lkd block-response=604", "directory: block-response must be 603, 607, 608 or 603+"),
            ("directory = a.lkd priority=1", "directory: unknown directory option 'priority' (expected name=, block-response=, block-treatment= or active=)"),
            ("directory = a.lkd spam", "directory: expected key=value after the path, got 'spam'"),
            ("directory = \"a.lkd", "directory: unterminated quote"),
            ("workers", "expected 'key = value'"),
            ("http-listen = 127.0.0.1", "http-listen: expected HOST:PORT (IPv6 in brackets, e.g. [::1]:8080)"),
            ("http-listen = udp:127.0.0.1:80", "http-listen: expected HOST:PORT (IPv6 in brackets, e.g. [::1]:8080)"),
            ("http-allow-from = everyone", "http-allow-from: 'everyone' is not an address or address block (e.g. 192.0.2.0/24, ::1)"),
            ("http-max-connections = 0", "http-max-connections: expected a number from 1 to 65536"),
            ("log-format = xml", "log-format: expected text or json"),
            ("log-file = ", "log-file: expected a path"),
            ("log-file-max-size = 1K", "log-file-max-size: expected a size of at least 4096 bytes, e.g. 10M"),
            ("log-file-max-size = 10X", "log-file-max-size: expected a size of at least 4096 bytes, e.g. 10M"),
            ("log-file-max-size = 99999999999999999999G", "log-file-max-size: expected a size of at least 4096 bytes, e.g. 10M"),
            ("log-file-keep = 101", "log-file-keep: expected a number from 0 to 100"),
        ]
        for (text, message) in cases {
            XCTAssertEqual(error("# first line\n" + text), "/etc/lookupd/lookupd.conf:2: " + message, text)
        }
    }

    /// Numbering-plan problems only show when the plan is built from all its
    /// keys; the error must still name the line of the key at fault.
    func testNumberingPlanErrorsNameTheRightLine() {
        XCTAssertEqual(error("country-code = 86\nnational-number-length = 10-11\nnational-prefix = abc\n"),
                       "/etc/lookupd/lookupd.conf:3: national prefix 'abc' must be up to 4 digits")
        XCTAssertEqual(error("international-prefix = 0\nnational-number-length = 10-11\n"),
                       "/etc/lookupd/lookupd.conf:1: national prefix '0' must not start with the international prefix '0'")
        XCTAssertEqual(error("national-number-length = 10-11\ninternational-prefix = 00000\n"),
                       "/etc/lookupd/lookupd.conf:2: international prefix '00000' must be up to 4 digits")
        XCTAssertEqual(error("country-code = 86\nnational-number-length = 1-11\n"),
                       "/etc/lookupd/lookupd.conf:2: national number length 1-11 is out of range (at least 2, and with the country code at most 15 digits)")
        XCTAssertEqual(error("workers = 1\ncountry = XX\n"),
                       "/etc/lookupd/lookupd.conf:2: 'XX' is not a region libphonenumber knows (an ISO 3166 code such as CN, US, GB, IT, DE)")
        XCTAssertEqual(error("country = CHN\n"), "/etc/lookupd/lookupd.conf:1: country: expected a two-letter region code such as CN, US or IT")
        XCTAssertEqual(error("country = US\nworkers = 1\ncountry-code = 44\n"),
                       "/etc/lookupd/lookupd.conf:3: country code 44 is not US's (+1); drop country-code or fix it")
        XCTAssertEqual(error("country-code = 999\n"), "/etc/lookupd/lookupd.conf:1: no country has calling code 999")
        XCTAssertEqual(error("unknown-label = attribution\n"),
                       "/etc/lookupd/lookupd.conf:1: unknown-label = attribution needs 'attribution = LANG' (zh, en, ...)")
        XCTAssertEqual(error("attribution = chinese\n"), "/etc/lookupd/lookupd.conf:1: attribution: expected a language code such as zh or en, or off")
    }

    func testRelativePathsAreResolvedAgainstTheConfigFolder() throws {
        let text = "directory = lists/a.lkd\ncontacts = ../shared/c.vcf\ncontrol-socket = ctl.sock\nstate-directory = state\ndirectory = /abs/b.lkd\n"
        var c = try parse(text, path: "/opt/lookupd/etc/lookupd.conf")
        XCTAssertEqual(c.directories.map(\.path), ["/opt/lookupd/etc/lists/a.lkd", "/abs/b.lkd"])
        XCTAssertEqual(c.directories.map(\.name), ["a.lkd", "b.lkd"])
        XCTAssertEqual(c.contacts, ["/opt/lookupd/etc/../shared/c.vcf"])
        XCTAssertEqual(c.controlSocket, "/opt/lookupd/etc/ctl.sock")
        XCTAssertEqual(c.stateDirectory, "/opt/lookupd/etc/state")
        // A config named without a folder: paths stay relative to the working directory.
        c = try parse(text, path: "lookupd.conf")
        XCTAssertEqual(c.directories.map(\.path), ["lists/a.lkd", "/abs/b.lkd"])
        c = try parse(text, path: "/lookupd.conf")
        XCTAssertEqual(c.directories.map(\.path), ["/lists/a.lkd", "/abs/b.lkd"])
    }

    func testCommentsAndQuotedValues() throws {
        let text = """
        # whole-line comment
           # indented comment
        directory = "/srv/my lists/a b.lkd" name="Operator List" # trailing comment
        contacts = "/srv/contacts #1.vcf"
        label-header = X-Label\t# after a tab
        workers = 2#not a comment
        """
        XCTAssertEqual(error(text), "/etc/lookupd/lookupd.conf:6: workers: expected auto or a number from 1 to 256")
        let c = try parse(text.replacingOccurrences(of: "workers = 2#not a comment", with: "workers = 2 # a comment"))
        XCTAssertEqual(c.directories, [DirectoryConfig(path: "/srv/my lists/a b.lkd", name: "Operator List")])
        XCTAssertEqual(c.contacts, ["/srv/contacts #1.vcf"])
        XCTAssertEqual(c.labelHeader, "X-Label")
        XCTAssertEqual(c.workers, 2)
    }

    func testLineEndingsAndWhitespace() throws {
        let c = try parse("workers=3\r\n\r\n  log-level   =   notice  \r\n\tcountry-code\t=\t44\r\n")
        XCTAssertEqual(c.workers, 3)
        XCTAssertEqual(c.logLevel, .notice)
        XCTAssertEqual(c.plan.countryCode, 44)
        XCTAssertEqual(error("workers = 1\r\nbogus = 1\r\n"), "/etc/lookupd/lookupd.conf:2: unknown key 'bogus'")
        // A Windows-edited file must not run two lines together.
        let windows = try parse("contacts = a.vcf\r\ndirectory = b.lkd\r\n")
        XCTAssertEqual(windows.contacts, ["/etc/lookupd/a.vcf"])
        XCTAssertEqual(windows.directories.map(\.path), ["/etc/lookupd/b.lkd"])
    }

    func testInvalidUTF8AndMissingFile() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanup() }
        let path = folder.file("bad.conf")
        _ = FileManager.default.createFile(atPath: path, contents: Data([0x77, 0x6F, 0xFF, 0x3D, 0x31, 0x0A]))
        XCTAssertThrowsError(try ConfigParser.load(path: path)) { error in
            XCTAssertEqual("\(error)", "\(path): not valid UTF-8")
        }
        let missing = folder.file("missing.conf")
        XCTAssertThrowsError(try ConfigParser.load(path: missing)) { error in
            XCTAssertEqual("\(error)", "\(missing): cannot open: No such file or directory")
        }
    }

    func testDirectoryOptions() throws {
        let c = try parse("""
        directory = a.lkd name=first block-response=607
        directory = b.lkd block-response=603+ name="Second list"
        directory = c.lkd
        redress = email=redress@example.net location=RLN
        """)
        XCTAssertEqual(c.directories.map(\.name), ["first", "Second list", "c.lkd"])
        XCTAssertEqual(c.directories.map(\.blockResponse), [.unwanted, .networkBlocked, nil])
    }

    func testNetworkAddresses() throws {
        let block = try XCTUnwrap(CIDR("192.0.2.0/24"))
        XCTAssertTrue(block.contains(try XCTUnwrap(IPAddress("192.0.2.77"))))
        XCTAssertFalse(block.contains(try XCTUnwrap(IPAddress("192.0.3.1"))))
        XCTAssertFalse(block.contains(try XCTUnwrap(IPAddress("::ffff:c000:301"))))
        XCTAssertTrue(block.contains(try XCTUnwrap(IPAddress("::ffff:192.0.2.1"))), "IPv4-mapped IPv6 is the same address")
        XCTAssertEqual(CIDR("192.0.2.77/24")?.description, "192.0.2.0/24", "host bits are masked")
        let v6 = try XCTUnwrap(CIDR("2001:db8::/32"))
        XCTAssertTrue(v6.contains(try XCTUnwrap(IPAddress("2001:db8:1::5"))))
        XCTAssertFalse(v6.contains(try XCTUnwrap(IPAddress("2001:db9::1"))))
        XCTAssertTrue(try XCTUnwrap(CIDR("0.0.0.0/0")).contains(try XCTUnwrap(IPAddress("203.0.113.9"))))
        XCTAssertFalse(try XCTUnwrap(CIDR("0.0.0.0/0")).contains(try XCTUnwrap(IPAddress("2001:db8::1"))), "an IPv4 block holds no IPv6 address")
        XCTAssertNil(CIDR("2001:db8::/129"))
        XCTAssertNil(CIDR("10.0.0.1/-1"))
        XCTAssertEqual(ListenAddress("UDP:127.0.0.1:5060")?.description, "udp:127.0.0.1:5060")
        XCTAssertEqual(ListenAddress("tcp:[2001:db8::1]:5060")?.port, 5060)
        XCTAssertNil(ListenAddress("tcp:2001:db8::1:5060"))
        XCTAssertNil(ListenAddress("udp:127.0.0.1"))
    }

    // MARK: - Loading a screening set

    func testSampleConfigurationLoadsAndScreens() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanup() }
        for name in ["lookupd.conf", "sample-contacts.vcf", "sample-directory.csv"] {
            try FileManager.default.copyItem(atPath: sampleConfigFolder.appendingPathComponent(name).path, toPath: folder.file(name))
        }
        let compiler = DirectoryCompiler()
        try compiler.add(path: folder.file("sample-directory.csv"))
        guard case .success(let content) = compiler.finish() else { return XCTFail("the sample directory does not compile") }
        try DirectoryWriter.write(content, to: folder.file("sample.lkd"))

        let config = try ConfigParser.load(path: folder.file("lookupd.conf"))
        XCTAssertEqual(config.directories, [DirectoryConfig(path: folder.file("sample.lkd"), name: "sample")])
        XCTAssertEqual(config.contacts, [folder.file("sample-contacts.vcf")])
        let loaded = try ScreeningLoader.load(config, verify: true)
        XCTAssertEqual(loaded.warnings, [])
        let set = loaded.set
        func verdict(_ identity: String) -> String {
            let d = set.decide(identity: identity)
            return "\(d.verdict.rawValue) \(d.label.map { set.label($0) } ?? "-") \(d.source.map { set.sourceName($0) } ?? "-")"
        }
        // Mum is a contact although the directory blocks her number.
        XCTAssertEqual(verdict("+8613911112222"), "contact Mum \(folder.file("sample-contacts.vcf"))")
        XCTAssertEqual(verdict("013812345678"), "contact Zhang Wei \(folder.file("sample-contacts.vcf"))")
        XCTAssertEqual(verdict("+8613800138000"), "blocked Fraud Risk sample")
        XCTAssertEqual(verdict("010 5900 0000"), "identified Beijing Municipal Hospital sample")
        XCTAssertEqual(verdict("+8617012345678"), "blocked Virtual Operator Range sample")
        XCTAssertEqual(verdict("+8617055551234"), "identified Known Virtual Operator sample")
        XCTAssertEqual(verdict("+8613900000000"), "unknown - -")
    }

    /// `contacts =` with its columns named, and a path with a space that
    /// is still read as written.
    func testContactsLineNamesItsColumns() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanup() }
        folder.write("phone book.csv", "name,number\nMum,+8613911112222\n")
        folder.write("crm.csv", "Who,Tel,Notes\nBank,+8610955880000,call back\n")
        folder.write("bare.csv", "+8613800001111,Courier\n")
        let config = try ConfigParser.parse("""
        contacts = phone book.csv
        contacts = crm.csv name-column=Who number-column=2
        contacts = bare.csv name-column=2 number-column=1 header=no

        """, path: folder.file("lookupd.conf"))
        XCTAssertEqual(config.contacts, [folder.file("phone book.csv"), folder.file("crm.csv"), folder.file("bare.csv")])
        XCTAssertEqual(config.contactColumns[folder.file("crm.csv")], CSVColumnMapping(number: .index(2), label: .name("Who")))
        let loaded = try ScreeningLoader.load(config, verify: true)
        XCTAssertEqual(loaded.warnings, [])
        func who(_ n: String) -> String { loaded.set.decide(identity: n).label.map { loaded.set.label($0) } ?? "-" }
        XCTAssertEqual(who("+8613911112222"), "Mum")
        XCTAssertEqual(who("+8610955880000"), "Bank")
        XCTAssertEqual(who("+8613800001111"), "Courier")
        XCTAssertThrowsError(try ConfigParser.parse("contacts = crm.csv number-column=2\n", path: folder.file("lookupd.conf"))) { error in
            XCTAssertTrue("\(error)".contains("name both columns: name-column= and number-column="), "\(error)")
        }
    }

    func testLoaderErrors() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanup() }
        try compileDirectory("number,action,label\n+8613800138000,block,Spam\n", named: "good.lkd", in: folder)
        folder.write("contacts.csv", "name,number\nMum,+8613911112222\nExt,101\n")
        folder.write("contacts.txt", "Mum +8613911112222\n")

        // Warnings from the contacts list are handed back, not fatal.
        var config = try ConfigParser.parse("directory = good.lkd\ncontacts = contacts.csv\n", path: folder.file("lookupd.conf"))
        let loaded = try ScreeningLoader.load(config, verify: true)
        XCTAssertEqual(loaded.warnings.map(\.description),
                       ["\(folder.file("contacts.csv")):3: '101' skipped: 3 digits is too short for a number of CN (+86), which has 7 to 12 digits after the country code (an internal extension or service code?)"])
        XCTAssertEqual(loaded.set.directories.map(\.name), ["good.lkd"])

        config = try ConfigParser.parse("contacts = contacts.txt\n", path: folder.file("lookupd.conf"))
        XCTAssertThrowsError(try ScreeningLoader.load(config, verify: false)) { error in
            XCTAssertEqual("\(error)", "\(folder.file("contacts.txt")): cannot tell the format from the file name; name it .csv or .vcf")
        }
        config = try ConfigParser.parse("directory = missing.lkd\n", path: folder.file("lookupd.conf"))
        XCTAssertThrowsError(try ScreeningLoader.load(config, verify: false)) { error in
            XCTAssertEqual("\(error)", "\(folder.file("missing.lkd")): cannot open: No such file or directory")
        }

        // A damaged directory opens, but is refused when verification is
        // asked for, and without it has no say in a decision.
        var bytes = Array(FileManager.default.contents(atPath: folder.file("good.lkd"))!)
        let header = try DirectoryFile(path: folder.file("good.lkd")).header
        bytes[Int(header.keysOffset) + 8] ^= 0xFF
        _ = FileManager.default.createFile(atPath: folder.file("damaged.lkd"), contents: Data(bytes))
        config = try ConfigParser.parse("directory = damaged.lkd\n", path: folder.file("lookupd.conf"))
        let unverified = try ScreeningLoader.load(config, verify: false)
        let decision = unverified.set.decide(identity: "+8613800138000")
        XCTAssertEqual(decision.damagedDirectory, 0)
        XCTAssertEqual(decision.verdict, .unknown)
        XCTAssertThrowsError(try ScreeningLoader.load(config, verify: true)) { error in
            XCTAssertEqual("\(error)", "\(folder.file("damaged.lkd")): damaged: bytes 256...\(header.contentEnd - 1) (keys, values, label index, label data) do not match their checksum (the file is damaged)")
        }
    }
}
