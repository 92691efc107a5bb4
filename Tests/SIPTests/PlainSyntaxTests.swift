import Foundation
import XCTest
@testable import SIP

/// The plain-shape checks (PlainSyntax.swift) let the parser skip libosip2 for common header
/// values. They are only sound if every value they call plain is one osip accepts: these tests
/// hold them to that against the real library, on generated values of every shape and on
/// mutations of them.
final class PlainSyntaxTests: XCTestCase {

    static let interesting: [UInt8] = Array("\r\n\0:;,\"<>\\% @=?[]\t()/'`~*!+.-_&$#{}|^".utf8) + [0x7F, 0xFF, 0xC3, 0x01]

    // Pieces real traffic and the torture corpus use, plus boundary cases.
    static let users = ["+8613800138000", "alice", "a", "bob.smith", "+4930123;cpc=ordinary", "%2B49", "j%40x", "u&s=1,2$/",
                        "1", "-", "'quoted'", "x!~*()", "anonymous", ""]
    static let hosts = ["127.0.0.1", "example.com", "a", "h-1.example.org", "[::1]", "[2001:db8::9]", "[1.2.3.4]", "x.",
                        "[]", "[:]", "", "-", ".", "[fe80::1%25eth0]"]
    static let ports = ["", ":5060", ":1", ":65535", ":99999", ":123456", ":", ":0", ":06", ":5o"]
    static let uriParams = ["", ";user=phone", ";transport=udp;lr", ";lr", ";maddr=[::1]", ";a=b/c:d", ";x", ";=", ";a=",
                            ";;", ";p=%41", ";user=phone;", ";a=[]", ";ob"]
    static let schemes = ["sip:", "sips:", "SIP:", "Sips:", "tel:", "TEL:", "sipx:", "si:", "s:", "mailto:", "http:", "sip", ":"]
    static let displays = ["", "\"Mobile\" ", "\"Mobile\"", "\"A B\"  ", "\"\" ", "\"Caf\u{e9}\" ", "Bob ", "Bob Smith ",
                           "sipp ", "\"x\\\"y\" ", "\"unterminated ", "B<b ", "\"a;b\" ", "a\"b\" "]
    static let headerParams = ["", ";tag=1", ";tag=as5f3b2c1e", ";tag=1234-5678;x", ";tag=", ";=x", ";tag=\"q\"",
                               ";a=b;c=d", ";tag=a b", ";", ";;", ";tag=a,b", ";expires=60",
                               ";TaG=Up", ";x=1;tag=a;tag=b", ";tags=1", ";ta=1;tag"]
    static let telBodies = ["+8613800138000", "1", "12", "+1-212-555-0100;phone-context=x", "12;", "+49(0)30", "a=b", ""]

    /// `sipOnly`: a sip:/sips: URI without `?headers` (more of them plain, for the one-walk tests).
    func uri(_ r: inout SeededRandom, sipOnly: Bool = false) -> String {
        let scheme = sipOnly ? r.pick(["sip:", "sips:", "SIP:", "Sips:"]) : r.pick(Self.schemes)
        if scheme.lowercased() == "tel:" { return scheme + r.pick(Self.telBodies) }
        let user = r.pick(Self.users)
        let userPart = user.isEmpty ? (r.below(4) == 0 ? "@" : "") : user + r.pick(["@", "@", "@", ":pw@", "@@", ""])
        return scheme + userPart + r.pick(Self.hosts) + r.pick(Self.ports) + r.pick(Self.uriParams) + (sipOnly ? "" : r.pick(["", "", "", "?h=1", "?"]))
    }

    func nameAddress(_ r: inout SeededRandom, sipOnly: Bool = false) -> String {
        let u = uri(&r, sipOnly: sipOnly)
        switch r.below(4) {
        case 0: return u + r.pick(Self.headerParams)
        case 1: return "<" + u + ">" + r.pick(Self.headerParams)
        default: return r.pick(Self.displays) + "<" + u + r.pick([">", ">", ">", "", "> ", ">x"]) + r.pick(Self.headerParams)
        }
    }

    func via(_ r: inout SeededRandom) -> String {
        let proto = r.pick(["SIP/2.0/UDP", "SIP/2.0/TCP", "SIP/2.0/TLS", "sip/2.0/udp", "SIP/3.0/UDP", "SIP//UDP", "SIP/2.0/",
                            "SIP/2.0", "SIP / 2.0 / UDP", "X/1/Y", "SIP/2.0/UDP/X"])
        let sep = r.pick([" ", " ", " ", "  ", "\t", ""])
        let params = r.pick(["", ";branch=z9hG4bK776asdhds", ";branch=z9hG4bK1;rport", ";rport", ";rport=5060;received=1.2.3.4",
                             ";branch=", ";=x", ";received=::1", ";branch=a;;", ";maddr=[::1]", ";ttl=1", " ;branch=x", ";branch=\"x\"",
                             " (comment)", ";branch=x (c)", ";BRANCH=z9hG4bKUp", ";branch=a;branch=b",
                             ";rport;branch", ";branches=1;branch=2", ";branch=z9hG4bK1;rport;x=y", ";RPORT=12;branch=q",
                             ";rport;rport=1", ";x=1;Received=2;rport", ";rportx=1;rport", ";receive=1;rport=", ";branch=b;rport=5060"])
        return proto + sep + r.pick(Self.hosts) + r.pick(Self.ports) + params
    }

    func callID(_ r: inout SeededRandom) -> String {
        r.pick(["lg123@127.0.0.1", "abc", "@x", "x@", "a@b@c", "a@@b", "123-456", "x y@z", "f81d4fae-7dec-11d0-a765-00a0c91e6bf6@foo.bar.com",
                "a\u{7F}b", "\"q\"@h", "a b", "@"])
    }

    func cseq(_ r: inout SeededRandom) -> String {
        r.pick(["1 INVITE", "0 ACK", "4294967295 BYE", "1  INVITE", "1\tINVITE", "INVITE", "1", " INVITE", "x INVITE", "1 INV ITE",
                "1 INVITE x", "01 OPTIONS", "1 foo-bar", "1 I\"x", "1 "])
    }

    func mutate(_ input: [UInt8], _ r: inout SeededRandom) -> [UInt8] {
        var m = input
        for _ in 0..<(1 + r.below(3)) {
            switch r.below(4) {
            case 0 where !m.isEmpty: m[r.below(m.count)] = Self.interesting[r.below(Self.interesting.count)]
            case 1: m.insert(Self.interesting[r.below(Self.interesting.count)], at: r.below(m.count + 1))
            case 2 where !m.isEmpty: m.remove(at: r.below(m.count))
            case 3 where !m.isEmpty: m[r.below(m.count)] = UInt8(truncatingIfNeeded: r.next())
            default: break
            }
        }
        return m
    }

    /// Runs `plain` and osip on many values; returns how many were plain.
    func check(_ name: String, count: Int, seed: UInt64, generate: (inout SeededRandom) -> String,
               plain: (SIPText) -> Bool, osip: (UnsafePointer<CChar>) -> Bool,
               file: StaticString = #filePath, line: UInt = #line) -> (plain: Int, mutatedPlain: Int) {
        // LOOKUPD_FUZZ_ITERATIONS (a multiple of the default count here) and LOOKUPD_FUZZ_SEED allow
        // longer local runs, as in RobustnessTests.
        let env = ProcessInfo.processInfo.environment
        let count = count * max(1, (env["LOOKUPD_FUZZ_ITERATIONS"].flatMap(Int.init) ?? 0) / 20_000)
        var r = SeededRandom(seed: seed ^ (env["LOOKUPD_FUZZ_SEED"].flatMap(UInt64.init) ?? 0))
        var plainCount = 0, mutatedPlain = 0
        var failures = 0
        for i in 0..<count {
            var bytes = Array(generate(&r).utf8)
            let mutated = i % 2 == 1
            if mutated { bytes = mutate(bytes, &r) }
            let isPlain = bytes.withUnsafeBytes { plain(SIPText(baseAddress: $0.baseAddress, count: $0.count)) }
            guard isPlain else { continue }
            plainCount += 1
            if mutated { mutatedPlain += 1 }
            // What the parser hands osip: a C string with NULs turned into spaces.
            let cString = bytes.map { $0 == 0 ? UInt8(ascii: " ") : $0 } + [0]
            let accepted = cString.withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { osip($0.baseAddress!) } }
            if !accepted {
                failures += 1
                if failures <= 10 {
                    XCTFail("\(name): plain but osip rejects: \(String(decoding: bytes, as: UTF8.self).debugDescription) \(bytes)",
                            file: file, line: line)
                }
            }
        }
        return (plainCount, mutatedPlain)
    }

    func testPlainURIsAreAcceptedByOsip() {
        let result = check("uri", count: 200_000, seed: 1, generate: { uri(&$0) },
                           plain: { isPlainURI($0) }, osip: OsipBridge.acceptsURI)
        XCTAssertGreaterThan(result.plain, 10_000)
        XCTAssertGreaterThan(result.mutatedPlain, 1_000)
    }

    func testPlainNameAddressesAreAcceptedByOsip() {
        let result = check("name-addr", count: 300_000, seed: 2, generate: { nameAddress(&$0) },
                           plain: isPlainNameAddress, osip: OsipBridge.acceptsNameAddress)
        XCTAssertGreaterThan(result.plain, 5_000)
        XCTAssertGreaterThan(result.mutatedPlain, 500)
    }

    func testPlainViasAreAcceptedByOsip() {
        let result = check("via", count: 200_000, seed: 3, generate: { via(&$0) },
                           plain: isPlainVia, osip: OsipBridge.acceptsVia)
        XCTAssertGreaterThan(result.plain, 5_000)
        XCTAssertGreaterThan(result.mutatedPlain, 500)
    }

    func testPlainCallIDsAndCSeqsAreAcceptedByOsip() {
        let ids = check("call-id", count: 50_000, seed: 4, generate: { callID(&$0) },
                        plain: isPlainCallID, osip: OsipBridge.acceptsCallID)
        XCTAssertGreaterThan(ids.plain, 5_000)
        let cseqs = check("cseq", count: 50_000, seed: 5, generate: { cseq(&$0) },
                          plain: isPlainCSeq, osip: OsipBridge.acceptsCSeq)
        XCTAssertGreaterThan(cseqs.plain, 5_000)
    }

    // MARK: - One walk against the two steps

    /// The same piece: the same bytes, and the same place in the value unless both were
    /// derived into an arena (a %-decoded user part).
    func samePiece(_ a: SIPText?, _ b: SIPText?, in value: UnsafeRawBufferPointer) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        func inValue(_ t: SIPText) -> Bool {
            guard let p = t.baseAddress, let base = value.baseAddress else { return false }
            return p >= base && p < base + value.count
        }
        guard a == b else { return false }
        if inValue(a) || inValue(b) { return a.baseAddress == b.baseAddress }
        return true
    }

    func sameParameters(_ a: SIPParameters, _ b: SIPParameters, in value: UnsafeRawBufferPointer) -> Bool {
        samePiece(a.text, b.text, in: value)
    }

    func sameURI(_ a: SIPURI, _ b: SIPURI, in v: UnsafeRawBufferPointer) -> Bool {
        a.scheme == b.scheme && a.port == b.port && samePiece(a.text, b.text, in: v) && samePiece(a.schemeText, b.schemeText, in: v)
            && samePiece(a.rawUser, b.rawUser, in: v) && samePiece(a.user, b.user, in: v) && samePiece(a.host, b.host, in: v)
            && sameParameters(a.parameters, b.parameters, in: v) && samePiece(a.headers, b.headers, in: v)
    }

    /// Runs the one-walk reader and the two steps (plain check, then reader) on many values:
    /// the one walk must give what the two steps give whenever it gives anything, and must
    /// give something for every plain value of the shapes it takes on.
    func compareOneWalk<T>(_ name: String, count: Int, seed: UInt64, generate: (inout SeededRandom) -> String,
                           oneWalk: (SIPText, inout Arena) -> T?, plain: (SIPText) -> Bool, read: (SIPText, inout Arena) -> T?,
                           taken: (SIPText) -> Bool, same: (T, T, UnsafeRawBufferPointer) -> Bool,
                           file: StaticString = #filePath, line: UInt = #line) -> Int {
        var r = SeededRandom(seed: seed)
        var arenaA = Arena(capacity: 65536), arenaB = Arena(capacity: 65536)
        defer { arenaA.deallocate(); arenaB.deallocate() }
        var hits = 0, failures = 0
        for i in 0..<count {
            var bytes = Array(generate(&r).utf8)
            if i % 2 == 1 { bytes = mutate(bytes, &r) }
            arenaA.reset()
            arenaB.reset()
            let problem: String? = bytes.withUnsafeBytes { raw in
                let text = SIPText(baseAddress: raw.baseAddress, count: raw.count)
                let fast = oneWalk(text, &arenaA)
                let slow = plain(text) ? read(text, &arenaB) : nil
                switch (fast, slow) {
                case (nil, nil): return nil
                case (let f?, let s?): hits += 1; return same(f, s, raw) ? nil : "differs"
                case (_?, nil): return "one walk reads what the two steps refuse"
                case (nil, _?): return taken(text) ? "one walk refuses a plain value" : nil
                }
            }
            if let problem {
                failures += 1
                if failures <= 10 { XCTFail("\(name): \(problem): \(String(decoding: bytes, as: UTF8.self).debugDescription)", file: file, line: line) }
            }
        }
        return hits
    }

    func testOneWalkURIsReadAsTheTwoSteps() { withEarlier { earlier, _ in
        for allow in [true, false] {
            let hits = compareOneWalk("uri", count: 200_000, seed: 11, generate: { r in let sipOnly = r.below(2) == 0; return uri(&r, sipOnly: sipOnly) },
                                      oneWalk: { text, arena in
                                          var uri = earlier.uri
                                          return readPlainSIPURI(text, allowSemicolonInUser: allow, into: &uri, arena: &arena) ? uri : nil
                                      },
                                      plain: { isPlainURI($0, allowSemicolonInUser: allow) },
                                      read: { SIPURI.read($0, arena: &$1) },
                                      taken: { $0.count > 3 && ($0[0] | 0x20) == UInt8(ascii: "s") && !Self.hasLargePort($0) },
                                      same: sameURI)
            XCTAssertGreaterThan(hits, allow ? 8_000 : 500)
        }
    } }

    func testOneWalkNameAddressesReadAsTheTwoSteps() { withEarlier { earlier, _ in
        let hits = compareOneWalk("name-addr", count: 300_000, seed: 12, generate: { r in let sipOnly = r.below(2) == 0; return nameAddress(&r, sipOnly: sipOnly) },
                                  oneWalk: { text, arena in
                                      var address = earlier
                                      return readPlainNameAddress(text, into: &address, arena: &arena) ? address : nil
                                  },
                                  plain: isPlainNameAddress,
                                  read: { SIPNameAddress.read($0, arena: &$1) },
                                  taken: { !Self.containsTel($0) && !Self.hasLargePort($0) && !isLWS($0[0]) },
                                  same: { a, b, v in
                                      samePiece(a.displayName, b.displayName, in: v) && samePiece(a.rawDisplayName, b.rawDisplayName, in: v)
                                          && sameURI(a.uri, b.uri, in: v) && sameParameters(a.parameters, b.parameters, in: v)
                                          && Self.isNoted(a.notedTag) && samePiece(a.tag, b.tag, in: v)
                                  })
        XCTAssertGreaterThan(hits, 3_000)
    } }

    func testOneWalkViasReadAsTheTwoSteps() { withEarlier { _, earlierVia in
        var rewritten = 0
        let hits = compareOneWalk("via", count: 200_000, seed: 13, generate: { via(&$0) },
                                  oneWalk: { text, _ in
                                      var via = earlierVia
                                      return readPlainVia(text, into: &via) ? via : nil
                                  },
                                  plain: isPlainVia,
                                  read: { text, _ in SIPVia.read(text) },
                                  taken: { !Self.hasLargePort($0) },
                                  same: { a, b, v in
                                      samePiece(a.protocolName, b.protocolName, in: v) && samePiece(a.protocolVersion, b.protocolVersion, in: v)
                                          && samePiece(a.transport, b.transport, in: v) && samePiece(a.host, b.host, in: v)
                                          && a.port == b.port && sameParameters(a.parameters, b.parameters, in: v)
                                          && Self.isNoted(a.notedBranch) && samePiece(a.branch, b.branch, in: v)
                                          && sameWrittenVia(a, b, in: v, noted: &rewritten)
                                  })
        XCTAssertGreaterThan(hits, 3_000)
        XCTAssertGreaterThan(rewritten, 1_000)
    } }

    /// `writeVia` from the one walk's noted `rport` item writes what the loop over the
    /// parameters writes for the two steps' Via (which has nothing noted), for a source that
    /// is the sent-by host and one that is not, with and without `addRport`.
    func sameWrittenVia(_ a: SIPVia, _ b: SIPVia, in v: UnsafeRawBufferPointer, noted: inout Int) -> Bool {
        if case .known = a.notedRport { noted += 1 }
        if case .known = b.notedRport { return false }
        let value = SIPText(baseAddress: v.baseAddress, count: v.count)
        var host = a.host.string
        if host.isEmpty { host = "::1" }
        for source in [SIPSourceAddress(ip: host, port: 5099), SIPSourceAddress(ip: "10.0.0.9", port: 7)] {
            for addRport in [false, true] {
                var one = [UInt8](repeating: 0, count: 4096), two = one
                let n1 = one.withUnsafeMutableBytes { buffer in
                    var w = ByteWriter(buffer)
                    writeVia(a, of: value, source: source, addRport: addRport, into: &w)
                    return w.count
                }
                let n2 = two.withUnsafeMutableBytes { buffer in
                    var w = ByteWriter(buffer)
                    writeVia(b, of: value, source: source, addRport: addRport, into: &w)
                    return w.count
                }
                if one.prefix(n1) != two.prefix(n2) { return false }
            }
        }
        return true
    }

    /// A plain Request-URI is one the parser may copy into a Contact unchecked.
    func testOneWalkRequestURIsAreSafe() {
        var r = SeededRandom(seed: 14)
        var arena = Arena(capacity: 65536)
        defer { arena.deallocate() }
        var hits = 0
        for i in 0..<100_000 {
            var bytes = Array(uri(&r, sipOnly: true).utf8)
            if i % 2 == 1 { bytes = mutate(bytes, &r) }
            arena.reset()
            bytes.withUnsafeBytes { raw in
                let text = SIPText(baseAddress: raw.baseAddress, count: raw.count)
                var parsed = SIPURI()
                if readPlainSIPURI(text, into: &parsed, arena: &arena) {
                    hits += 1
                    if !isSafeURI(text) { XCTFail(text.string) }
                }
            }
        }
        XCTAssertGreaterThan(hits, 5_000)
    }

    /// What the one walk writes over: a value with every part set, read from other bytes, so
    /// a part the one walk forgot to write shows.
    func withEarlier(_ body: (SIPNameAddress, SIPVia) -> Void) {
        var text = Array("\"Earlier\" <sips:old%41:pw@[2001:db8::7]:7000;lr?h=v>;tag=old  SIP/2.0/TLS [::9]:9;branch=old".utf8)
        var arena = Arena(capacity: 4096)
        defer { arena.deallocate() }
        text.withUnsafeMutableBytes { raw in
            let address = SIPNameAddress.read(SIPText(baseAddress: raw.baseAddress, count: 60), arena: &arena)!
            XCTAssertTrue(address.displayName != nil && address.uri.rawUser != nil && address.uri.port != nil && address.uri.headers.count > 0)
            let via = SIPVia.read(SIPText(baseAddress: raw.baseAddress! + 62, count: raw.count - 62))!
            XCTAssertTrue(via.port == 9 && via.branch != nil)
            body(address, via)
        }
    }

    /// The one walk noted the parameter, so `tag` and `branch` did not search the parameters.
    static func isNoted(_ noted: NotedParameter) -> Bool {
        if case .known = noted { return true }
        return false
    }

    /// The shapes the one walk leaves to the two steps on purpose.
    static func containsTel(_ t: SIPText) -> Bool { t.string.lowercased().contains("tel:") }
    /// A ':' and five digits above 65535 (a plain port the readers refuse).
    static func hasLargePort(_ t: SIPText) -> Bool {
        let b = Array(t)
        for i in b.indices where b[i] == ASCII.colon {
            var value = 0, j = i + 1
            while j < b.count, isDigit(b[j]) { value = value * 10 + Int(b[j] - 0x30); j += 1 }
            if j - i - 1 == 5, value > 65535 { return true }
        }
        return false
    }

    /// The word-at-a-time Call-ID check against its byte-by-byte definition, on every length
    /// up to 40 with the boundary bytes (0x20, 0x21, 0x7E, 0x7F, 0x80, 0xFF, '@') anywhere.
    func testPlainCallIDMatchesItsDefinition() {
        func reference(_ b: [UInt8]) -> Bool {
            guard !b.isEmpty, b.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return false }
            let ats = b.filter { $0 == ASCII.at }.count
            return ats == 0 || (ats == 1 && b.first != ASCII.at && b.last != ASCII.at)
        }
        let plain = compareWithDefinition(seed: 15, boundary: [0x00, 0x09, 0x20, 0x21, 0x40, 0x41, 0x7E, 0x7F, 0x80, 0xC3, 0xFF, 0x61, 0x61, 0x61, 0x61, 0x61],
                                          isPlainCallID, reference)
        XCTAssertGreaterThan(plain, 50_000)
    }

    func testByteClassTableMatchesTheDefinitions() {
        func check(_ c: ByteClass, _ characters: String, alphanumeric: Bool = true, _ name: String) {
            var expected = Set(characters.utf8)
            if alphanumeric { expected.formUnion(Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8)) }
            for b in 0...255 { XCTAssertEqual(c.contains(UInt8(b)), expected.contains(UInt8(b)), "\(name) \(b)") }
        }
        check(.user, "-_.!~*'()%&=+$,;/", "user")
        check(.userNoSemicolon, "-_.!~*'()%&=+$,/", "userNoSemicolon")
        check(.host, "-.", "host")
        check(.ipv6, ":.abcdefABCDEF0123456789", alphanumeric: false, "ipv6")
        check(.uriParameter, "-_.!~*'()%[]/:&+$", "uriParameter")
        check(.opaque, "-_.!~*'()%[]/:&+$;=,", "opaque")
        check(.token, "-.!%*_+`'~", "token")
        for b in 0...255 { XCTAssertEqual(ByteClass.token.contains(UInt8(b)), isTokenByte(UInt8(b))) }
    }

    /// What PBXs, sipp and the benchmark's load generator send is plain, so the fast path is the
    /// common path.
    func testCommonValuesArePlain() {
        func text(_ s: String, _ body: (SIPText) -> Bool) -> Bool {
            var s = s
            return s.withUTF8 { body(SIPText(baseAddress: $0.baseAddress, count: $0.count)) }
        }
        for v in ["\"Mobile\" <sip:+8613800138000@127.0.0.1;user=phone>;tag=1a2b3c", "<sip:100@127.0.0.1;user=phone>", "sip:alice@example.com;tag=x",
                  "sipp <sip:sipp@127.0.0.1:5061>;tag=12345SIPpTag001", "sut <sip:service@127.0.0.1:5080>",
                  "\"Alice\" <sips:alice@example.com>;tag=9fxced76sl", "<tel:+8613800138000>",
                  "\"Anonymous\" <sip:anonymous@anonymous.invalid>;tag=as5f3b2c1e", "<sip:+4930123;cpc=ordinary@[2001:db8::1]:5060>"] {
            XCTAssertTrue(text(v, isPlainNameAddress), v)
        }
        for v in ["SIP/2.0/UDP 127.0.0.1:40000;branch=z9hG4bK1-2;rport", "SIP/2.0/TCP pbx.example.com;branch=z9hG4bKabc",
                  "SIP/2.0/UDP [2001:db8::1]:5060;branch=z9hG4bKx;received=192.0.2.1"] {
            XCTAssertTrue(text(v, isPlainVia), v)
        }
        for v in ["sip:100@127.0.0.1:5080", "sip:+8613800138000@pbx.example.com;user=phone", "sips:a@[::1]"] {
            XCTAssertTrue(text(v) { isPlainURI($0) }, v)
        }
        XCTAssertTrue(text("lg0000000000000001@127.0.0.1", isPlainCallID))
        XCTAssertTrue(text("1 INVITE", isPlainCSeq))
        XCTAssertTrue(text("314159 OPTIONS", isPlainCSeq))
    }

    /// The scratch arena keeps osip's allocations off the heap and survives osip objects larger
    /// than the arena (the hooks fall back to malloc and the object is freed by osip).
    func testOsipWithValuesLargerThanTheArena() {
        var long = "<sip:u@h"
        for i in 0..<5_000 { long += ";p\(i)=v\(i)" }
        long += ">;tag=1"
        var bytes = Array(long.utf8) + [0]
        for _ in 0..<3 {
            let ok = bytes.withUnsafeMutableBufferPointer { $0.withMemoryRebound(to: CChar.self) { OsipBridge.acceptsNameAddress($0.baseAddress!) } }
            XCTAssertTrue(ok)
        }
        bytes = Array("<sip:u@h>;tag=1".utf8) + [0]
        let ok = bytes.withUnsafeMutableBufferPointer { $0.withMemoryRebound(to: CChar.self) { OsipBridge.acceptsNameAddress($0.baseAddress!) } }
        XCTAssertTrue(ok)
    }
}
