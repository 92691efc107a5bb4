import Addresses
import Configuration
import Directory
import Glibc
import SIP
import Screening

/// proxy-path: `mode = proxy`, requests and responses. The first byte chooses how the rest
/// arrives, the rest is what a peer sent.
///
///   bit 0     0: UDP, 1: TCP
///   bits 1-2  source: 198.51.100.7 (a caller), 203.0.113.9 (outside allow-from),
///             192.0.2.20:5060 (the upstream's address), 2001:db8::7 (a caller over IPv6)
///   bit 3     configuration A (a label-format around the caller's name, the label in
///             P-Asserted-Identity) or B (label-escapes = replace, max-message-size 1500,
///             refuse-action = drop, another label header, upstream down: 503s)
///   bit 4     the rest arrives on the upstream's own socket (responses, or requests the
///             upstream sends)
///
/// Checked: an answer lookupd gives itself is one well-formed response with only the header
/// lines lookupd writes; a forwarded request parses again as a request with lookupd's Via on
/// top and the real source as received/rport under it; and then — the property D1 broke — the
/// upstream's answer to it, its Via path copied as a UAS does, is relayed to exactly the
/// address and port the request came from, over the transport it came over, never anywhere
/// the request's own Via said. A relayed response has no bare CR or LF and no NUL outside a
/// quoted-pair in its header section.
final class ProxyPathTarget: @unchecked Sendable {
    static let shared = ProxyPathTarget()

    struct Variant {
        let harness: ProxyPathHarness
        let labelHeader: String
    }

    let variants: [Variant]
    let sources: [(ip: IPAddress, port: UInt16)] = [
        (IPAddress("198.51.100.7")!, 5062), (IPAddress("203.0.113.9")!, 5060), (IPAddress("192.0.2.20")!, 5060), (IPAddress("2001:db8::7")!, 40001),
    ]
    /// Kept alive: the harnesses' screening sets map them.
    let files: [DirectoryFile]

    private init() {
        let main = RequestPathTarget.compile(RequestPathTarget.mainCSV, name: "proxy-main")
        files = [main]
        let screening = ScreeningSet(normalizer: NumberNormalizer(plan: .china), contacts: [],
                                     directories: [ScreeningDirectory(name: "main", file: main)])
        let common = """
        mode = proxy
        upstream = 192.0.2.20:5060
        listen = udp:192.0.2.5:5060
        listen = tcp:192.0.2.5:5060
        directory = /nonexistent/main.lkd name=main
        allow-from = 198.51.100.0/24, 192.0.2.0/24, 2001:db8::/32
        trust-asserted-identity-from = 2001:db8::/32

        """
        let a = common + """
        label-format = [{label}] {name}
        label-in-asserted-identity = yes
        log-level = info

        """
        let b = common + """
        label-escapes = replace
        max-message-size = 1500
        refuse-action = drop
        label-header = X-Label
        log-level = debug

        """
        var variants: [Variant] = []
        for (i, text) in [a, b].enumerated() {
            let config: LookupdConfig
            do { config = try ConfigParser.parse(text, path: "/fuzz/lookupd.conf") } catch { FuzzCheck.fail("fixture config: \(error)") }
            variants.append(Variant(harness: ProxyPathHarness(config: config, screening: screening, upstreamAvailable: i == 0),
                                    labelHeader: config.labelHeader))
        }
        self.variants = variants
    }

    func run(_ input: UnsafeRawBufferPointer) {
        guard let mode = input.first else { return }
        let bytes = UnsafeRawBufferPointer(rebasing: input.dropFirst())
        let variant = variants[Int(mode >> 3) & 1]
        let transport: ListenAddress.Transport = mode & 1 == 0 ? .udp : .tcp
        let fromUpstreamSocket = mode & 0x10 != 0
        let source = fromUpstreamSocket ? (variant.harness.upstream.host, variant.harness.upstream.port) : sources[Int(mode >> 1) & 3]
        let outcome = variant.harness.receive(bytes, transport: transport, from: source.0, port: source.1, fromUpstream: fromUpstreamSocket)
        switch outcome {
        case .nothing, .probeAnswered:
            break
        case .reply(let answer):
            answer.withUnsafeBytes { AnswerCheck.response($0, labelHeader: variant.labelHeader, request: bytes) }
        case .upstream(let forwarded):
            checkForwarded(forwarded, variant, transport: transport, source: source, request: bytes)
        case .downstream(let relayed, let host, _, _):
            AnswerCheck.lineEnds(relayed, whole: false) { FuzzCheck.fail("relayed response: \($0)\n\(String(decoding: relayed, as: UTF8.self))", bytes) }
            if IPAddress(host) == nil { FuzzCheck.fail("a response relayed to '\(host)', not an address", bytes) }
        }
    }

    private func checkForwarded(_ forwarded: [UInt8], _ variant: Variant, transport: ListenAddress.Transport,
                                source: (IPAddress, UInt16), request: UnsafeRawBufferPointer) {
        func fail(_ why: String) -> Never {
            FuzzCheck.fail("\(why)\n--- forwarded ---\n\(String(decoding: forwarded, as: UTF8.self))", request)
        }
        AnswerCheck.lineEnds(forwarded, whole: false) { fail("forwarded request: \($0)") }
        let parser = SIPParser(maxMessageSize: 4 * 16384 + 8192)
        guard parser.parse(forwarded) == .request else { fail("the forwarded request does not parse as one") }
        let copy = parser.request
        guard let branch = copy.topVia.branch?.string, branch.hasPrefix("z9hG4bK-lkd"), branch.count == 43 else { fail("lookupd's Via is not on top") }
        // The header lines as forwarded, for the upstream's answer: Via path, From, To, Call-ID, CSeq.
        guard let end = forwarded.firstRange(of: [13, 10, 13, 10]) else { fail("no end of the header section") }
        var lines: [String] = []
        var start = 0
        for i in 0..<end.lowerBound where forwarded[i] == 13 && forwarded[i + 1] == 10 {
            lines.append(String(decoding: forwarded[start..<i], as: UTF8.self))
            start = i + 2
        }
        lines.append(String(decoding: forwarded[start..<end.lowerBound], as: UTF8.self))
        lines.removeFirst()
        let wanted = ["via", "v", "from", "f", "to", "t", "call-id", "i", "cseq"]
        let copied = lines.filter { line in
            guard let colon = line.firstIndex(of: ":") else { return false }
            return wanted.contains(String(line[..<colon].filter { $0 != " " && $0 != "\t" }).lowercased())
        }
        let ip = source.0.description
        guard let second = lines.filter({ $0.lowercased().hasPrefix("via:") || $0.lowercased().hasPrefix("v:") }).dropFirst().first,
              second.lowercased().contains(";rport=\(source.1)"), second.lowercased().contains(";received=\(ip)") else {
            fail("the caller's Via does not carry received=\(ip) and rport=\(source.1)")
        }
        // The upstream answers as a UAS: its Via path copied, sent from its own address.
        for code in ["180 Ringing", "200 OK"] {
            let answer = Array((["SIP/2.0 \(code)"] + copied + ["Content-Length: 0", "", ""]).joined(separator: "\r\n").utf8)
            let outcome = answer.withUnsafeBytes {
                variant.harness.receive($0, transport: transport, from: variant.harness.upstream.host, port: variant.harness.upstream.port,
                                        fromUpstream: true)
            }
            switch outcome {
            case .downstream(let relayed, let host, let port, let hopTransport):
                guard IPAddress(host) == source.0, port == source.1, hopTransport == (transport == .udp ? "UDP" : "TCP") else {
                    fail("the upstream's \(code) was relayed to \(hopTransport) \(host):\(port), the request came from \(transport) \(ip):\(source.1)")
                }
                AnswerCheck.lineEnds(relayed, whole: false) { fail("relayed \(code): \($0)") }
            case .nothing:
                // Dropped (a request whose Call-ID, From or CSeq the copy above could not carry
                // back as they were, say a folded one): never sent elsewhere.
                break
            default:
                fail("the upstream's \(code) was not relayed or dropped")
            }
        }
    }
}
