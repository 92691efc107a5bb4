import Identity
import XCTest
@testable import SIP

/// The caller identity SIP hands to screening (issue 14.2): scheme, the number decoded
/// once, its parameters and the display name, the same from a request's From and from
/// `SIPIdentityReader` (what `lookupd query` and `/lookup.json` use).
final class CallerIdentityTests: XCTestCase {
    struct Expected: Equatable, CustomStringConvertible {
        var scheme: CallerIdentity.Scheme
        var number: String?
        var phoneContext: String? = nil
        var verstat: String? = nil
        var userIsPhone = false
        var malformedEscape = false
        var displayName: String? = nil

        var description: String {
            "\(scheme) number=\(number.map { $0.debugDescription } ?? "nil") context=\(phoneContext ?? "-") verstat=\(verstat ?? "-") phone=\(userIsPhone) bad=\(malformedEscape) name=\(displayName ?? "-")"
        }
    }

    static func expected(_ identity: CallerIdentity) -> Expected {
        func text(_ b: UnsafeRawBufferPointer?) -> String? { b.map { String(decoding: $0, as: UTF8.self) } }
        return Expected(scheme: identity.scheme, number: text(identity.number), phoneContext: text(identity.phoneContext),
                        verstat: text(identity.verstat), userIsPhone: identity.userIsPhone,
                        malformedEscape: identity.malformedEscape, displayName: text(identity.displayName))
    }

    static let cases: [(String, Expected)] = [
        ("sip:+8613800138000@10.0.0.1;user=phone", Expected(scheme: .sip, number: "+8613800138000", userIsPhone: true)),
        ("sips:+8613800138000@example.com", Expected(scheme: .sips, number: "+8613800138000")),
        ("tel:+86-138-0013-8000", Expected(scheme: .tel, number: "+86-138-0013-8000")),
        ("tel:59000000;phone-context=+86-10", Expected(scheme: .tel, number: "59000000", phoneContext: "+86-10")),
        ("sip:59000000;phone-context=+86-10@example.com;user=phone",
         Expected(scheme: .sip, number: "59000000", phoneContext: "+86-10", userIsPhone: true)),
        // Decoded once: %2B is '+', %25 is '%' (and stays one: %252B is "%2B", not '+').
        ("sip:%2B8613800138000@host", Expected(scheme: .sip, number: "+8613800138000")),
        ("sip:%252B8613800138000@host", Expected(scheme: .sip, number: "%2B8613800138000")),
        ("sip:%2G8613800138000@host", Expected(scheme: .sip, number: "%2G8613800138000", malformedEscape: true)),
        ("sip:138%2@host", Expected(scheme: .sip, number: "138%2", malformedEscape: true)),
        // An escaped ';' is part of the user, an unescaped one starts its parameters.
        ("sip:+86138%3B0013@host", Expected(scheme: .sip, number: "+86138;0013")),
        ("sip:+8613800138000;cpc=ordinary@10.0.0.1;user=phone", Expected(scheme: .sip, number: "+8613800138000", userIsPhone: true)),
        // verstat: a URI parameter, or inside the user part (3GPP TS 24.229).
        ("sip:+12025550143;verstat=TN-Validation-Passed@carrier.example;user=phone",
         Expected(scheme: .sip, number: "+12025550143", verstat: "TN-Validation-Passed", userIsPhone: true)),
        ("tel:+12025550143;verstat=TN-Validation-Failed", Expected(scheme: .tel, number: "+12025550143", verstat: "TN-Validation-Failed")),
        ("sip:+12025550143@carrier.example;verstat=No-TN-Validation",
         Expected(scheme: .sip, number: "+12025550143", verstat: "No-TN-Validation")),
        // Display names, quoted and not.
        ("\"Alice\" <sip:+8613800138000@example.com>;tag=1234", Expected(scheme: .sip, number: "+8613800138000", displayName: "Alice")),
        ("\"Foo <Bar>\" <sip:+8613800138000@example.com>", Expected(scheme: .sip, number: "+8613800138000", displayName: "Foo <Bar>")),
        ("Bob Smith <sip:1001@pbx>", Expected(scheme: .sip, number: "1001", displayName: "Bob Smith")),
        ("<tel:+8613800138000>", Expected(scheme: .tel, number: "+8613800138000")),
        // No user part, another scheme: no number (withheld).
        ("sip:anonymous.invalid", Expected(scheme: .sip, number: nil)),
        ("sip:+8613800138000", Expected(scheme: .sip, number: nil)),
        ("<mailto:someone@example.com>", Expected(scheme: .other, number: nil)),
        // An empty user part: an empty number (nothing where the number belongs).
        ("sip:@host", Expected(scheme: .sip, number: "")),
        ("tel:", Expected(scheme: .tel, number: "")),
        // Not URIs: bare numbers, as written.
        ("+86 138 0013 8000", Expected(scheme: .none, number: "+86 138 0013 8000")),
        ("013800138000", Expected(scheme: .none, number: "013800138000")),
        ("anonymous", Expected(scheme: .none, number: "anonymous")),
    ]

    func testReaderTable() {
        let reader = SIPIdentityReader()
        for (input, expected) in Self.cases {
            let got = reader.withIdentity(input) { Self.expected($0) }
            XCTAssertEqual(got, expected, input)
        }
    }

    /// The same values from a parsed INVITE's From: the daemon and the reader agree.
    func testRequestFromAgreesWithTheReader() {
        let parser = SIPParser()
        let reader = SIPIdentityReader()
        for (input, expected) in Self.cases where expected.scheme != .none {
            // A From value needs a tag; a bare addr-spec ends at its first ';'.
            let from = input.contains("<") ? input : "<\(input)>"
            let message = """
            INVITE sip:1001@pbx SIP/2.0
            Via: SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bKcaller
            Max-Forwards: 70
            From: \(from)\(from.contains(";tag=") ? "" : ";tag=1")
            To: <sip:1001@pbx>
            Call-ID: identity-\(input.hashValue)@192.0.2.1
            CSeq: 1 INVITE
            Content-Length: 0


            """
            guard case .request = parser.parse(message) else {
                // The parser may refuse these From values outright (a 400): then no identity at all.
                XCTAssertTrue(["tel:", "sip:@host"].contains(input), "\(input) did not parse")
                continue
            }
            let fromRequest = Self.expected(parser.request.callerIdentity(.from))
            let fromReader = reader.withIdentity(from) { Self.expected($0) }
            XCTAssertEqual(fromRequest, fromReader, input)
            XCTAssertEqual(fromRequest, expected, input)
        }
    }
}
