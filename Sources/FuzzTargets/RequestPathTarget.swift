import Addresses
import Configuration
import Directory
import Glibc
import Screening
import TextFormats

/// request-path: the first byte chooses how the rest arrives, the rest is
/// what a peer sent.
///
///   bit 0     0: one UDP datagram, 1: bytes received on a TCP connection
///   bits 1-2  source: 127.0.0.1 (allowed), 127.0.0.2 (allowed, trusted for
///             P-Asserted-Identity), 192.0.2.9 (outside allow-from),
///             2001:db8::7 (IPv6, allowed and trusted)
///   bit 3     configuration A (defaults, 603+ blocks with redress) or B (small
///             max-message-size, 404 for unknown callers, drop refused
///             peers, a custom label header, 608 with a jCard, labels on
///             rejections, 433 for withheld callers, debug logging)
///
/// Checked for every answer: it is one well-formed SIP response whose
/// header lines are only the ones lookupd writes (no text from the request
/// or the lists can start a header line of its own or end the header
/// section early), and a UDP datagram sent twice gets the same answer.
final class RequestPathTarget: @unchecked Sendable {
    static let shared = RequestPathTarget()

    /// The directory sources: blocks, identifications, prefix rules, and
    /// labels that need escaping (quotes, backslashes) or are long or non-Latin.
    static let mainCSV = """
    number,action,label
    +8613800138000,block,Fraud Risk
    +8613700001111,block,
    +8613911112222,block,Telemarketing
    +8618600000000,identify,China Unicom Customer Service
    +8613812345678,identify,"Pizza Palace, Haidian"
    +8613566667777,identify,"Zoë's ""Café"" \\ Bar"
    +8613566667778,identify,"\\"
    +8613566667779,identify,"\""<sip:evil@example.com>\"""
    +8613511112222,identify,北京市公安局 反诈中心
    +8613511112223,identify,مركز الاتصال
    +8613511112224,identify,‏evil‎ 👨‍👩‍👧 ﷽
    +8613511112225,identify,\(String(repeating: "长", count: 85))
    01059000000,identify,Beijing Municipal Hospital
    +86170*,block,Virtual Operator Range
    +86171*,identify,Virtual Operator
    +1*,identify,North America
    +44*,block,

    """

    static let secondCSV = """
    number,action,label
    +8613000000001,block,Second List
    +8613000000002,identify,Second List Label
    +86130*,identify,Unicom 130

    """

    static let contactsVCF = """
    BEGIN:VCARD
    VERSION:3.0
    FN:Mum
    TEL;TYPE=CELL:+86 139 1111 2222
    END:VCARD
    BEGIN:VCARD
    VERSION:3.0
    FN:"Quoted" \\\\ Name
    TEL:136 0000 0000
    END:VCARD

    """

    struct Variant {
        let harness: RequestPathHarness
        let labelHeader: String
    }

    let variants: [Variant]
    let sources: [IPAddress] = ["127.0.0.1", "127.0.0.2", "192.0.2.9", "2001:db8::7"].map { IPAddress($0)! }
    /// Kept alive: the harnesses' screening sets map them.
    let files: [DirectoryFile]

    private init() {
        let main = RequestPathTarget.compile(RequestPathTarget.mainCSV, name: "main")
        let second = RequestPathTarget.compile(RequestPathTarget.secondCSV, name: "second")
        files = [main, second]
        let normalizer = NumberNormalizer(plan: .china)
        let contacts: ContactList
        do {
            contacts = try Array(RequestPathTarget.contactsVCF.utf8).withUnsafeBytes { bytes throws(Diagnostic) in
                try ContactList.parse(bytes: bytes, name: "contacts.vcf", format: .vcard, normalizer: normalizer).list
            }
        } catch {
            FuzzCheck.fail("fixture contacts: \(error)")
        }
        let screening = ScreeningSet(normalizer: normalizer, contacts: [contacts],
                                     directories: [ScreeningDirectory(name: "main", file: main),
                                                   ScreeningDirectory(name: "second", file: second)])
        let common = """
        directory = /nonexistent/main.lkd name=main
        directory = /nonexistent/second.lkd name=second block-response=607
        contacts = /nonexistent/contacts.vcf
        allow-from = 127.0.0.0/8, 2001:db8::/32
        trust-asserted-identity-from = 127.0.0.2, 2001:db8::/32

        """
        let a = common + """
        block-response = 603+
        redress = url=https://redress.example.net/r tel=+18005550100 email=redress@example.net location=RLN
        redress-q850 = yes
        log-level = info

        """
        let b = common + """
        max-message-size = 1500
        unknown-response = 404
        refuse-action = drop
        label-header = X-Label
        block-response = 608
        redress-jcard = https://example.net/jcard.jws
        label-to-caller = yes
        anonymous-callers = reject 433
        identity-order = ppi, rpid, pai, from
        log-level = debug

        """
        var variants: [Variant] = []
        for text in [a, b] {
            let config: LookupdConfig
            do { config = try ConfigParser.parse(text, path: "/fuzz/lookupd.conf") } catch { FuzzCheck.fail("fixture config: \(error)") }
            variants.append(Variant(harness: RequestPathHarness(config: config, screening: screening), labelHeader: config.labelHeader))
        }
        self.variants = variants
    }

    /// Compiles CSV text into a file, maps it and removes the file (the
    /// mapping outlives the name).
    static func compile(_ csv: String, name: String) -> DirectoryFile {
        let compiler = DirectoryCompiler()
        compiler.add(bytes: Array(csv.utf8), name: name + ".csv", format: .csv)
        guard case .success(let content) = compiler.finish() else { FuzzCheck.fail("fixture \(name): \(compiler.diagnostics)") }
        var template = Array("/tmp/lookupd-fuzz-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else { FuzzCheck.fail("mkdtemp") }
        let folder = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
        let path = folder + "/" + name + ".lkd"
        defer {
            unlink(path)
            rmdir(folder)
        }
        do {
            try DirectoryWriter.write(content, to: path)
            let file = try DirectoryFile(path: path)
            try file.verify()
            return file
        } catch {
            FuzzCheck.fail("fixture \(name): \(error)")
        }
    }

    func run(_ input: UnsafeRawBufferPointer) {
        guard let mode = input.first else { return }
        let bytes = UnsafeRawBufferPointer(rebasing: input.dropFirst())
        let variant = variants[Int(mode >> 3) & 1]
        let source = sources[Int(mode >> 1) & 3]
        let port: UInt16 = 5060
        if mode & 1 == 0 {
            let first = variant.harness.datagram(bytes, from: source, port: port) { answer in
                check(answer, variant, bytes)
                return Array(answer)
            }
            // A retransmission gets a byte-identical answer (any worker, no state).
            variant.harness.datagram(bytes, from: source, port: port) { answer in
                if !answer.elementsEqual(first) { FuzzCheck.fail("a repeated datagram got a different answer", bytes) }
            }
        } else {
            _ = variant.harness.stream(bytes, from: source, port: port) { answer in
                check(answer, variant, bytes)
            }
        }
    }

    private func check(_ answer: UnsafeRawBufferPointer, _ variant: Variant, _ request: UnsafeRawBufferPointer) {
        AnswerCheck.response(answer, labelHeader: variant.labelHeader, request: request)
    }
}
