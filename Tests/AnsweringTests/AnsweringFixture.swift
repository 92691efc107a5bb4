@_exported import TestSupport
import Addresses
import Configuration
import Directory
import Foundation
import Loading
import SIP
import XCTest
@testable import Answering

/// Lists and a configuration loaded as the daemon loads them, and one worker's answerer: the
/// request path in process, with no socket anywhere.
final class AnsweringFixture {
    static let directoryCSV = """
    number,action,label
    +8613800138000,block,Fraud Risk
    +8613700001111,block,
    +8618600000000,identify,China Unicom Customer Service
    +8613566667777,identify,"Zoë's ""Café"" \\ Bar"
    +8613911112222,block,Telemarketing
    +86170*,block,Virtual Operator Range
    +8613566660000,identify,"\(String(repeating: "Long Label ", count: 22))End"

    """
    static let secondCSV = """
    number,action,label
    +8613000000001,block,Second List

    """
    static let contactsCSV = """
    name,number
    Mum,+8613911112222

    """

    let folder = TemporaryFolder("answering")
    let set: ServingSet
    var answerer: Answerer
    var log: LogLines
    let out = UnsafeMutableRawBufferPointer.allocate(byteCount: 2 * 16384 + 4096, alignment: 16)
    let fallback = UnsafeMutableRawBufferPointer.allocate(byteCount: 2 * 16384 + 4096, alignment: 16)
    /// Tuesday 2023-11-14 22:13:20 UTC.
    var now = WallTime(seconds: 1_700_000_000)
    var proxy: ProxyContext?

    /// `extra` lines follow a configuration with two directories (the second blocking with
    /// 607) and a contacts list.
    init(_ extra: [String] = [], proxy: Bool = false, toTagKey: UInt64 = 7, mainOptions: String = "") throws {
        try AnsweringFixture.compile(AnsweringFixture.directoryCSV, to: folder.file("main.lkd"))
        try AnsweringFixture.compile(AnsweringFixture.secondCSV, to: folder.file("second.lkd"))
        folder.write("contacts.csv", AnsweringFixture.contactsCSV)
        var lines = ["directory = main.lkd name=main" + mainOptions, "directory = second.lkd name=second block-response=607",
                     "contacts = contacts.csv", "log-level = debug"]
        if proxy { lines += ["mode = proxy", "upstream = 192.0.2.20:5060"] }
        let config = try ConfigParser.parse((lines + extra).joined(separator: "\n") + "\n", path: folder.file("lookupd.conf"))
        let loaded = try ScreeningLoader.load(config, verify: true)
        set = ServingSet(generation: 1, config: config, screening: loaded.set, zone: loaded.zone)
        answerer = Answerer(parser: SIPParser(maxMessageSize: config.maxMessageSize, toTagKey: toTagKey))
        log = LogLines(level: config.logLevel, writesFile: true, keepsRecent: true)
        if proxy {
            let via = SIPViaAddress(transport: "UDP", host: "192.0.2.1", port: 5070)
            self.proxy = ProxyContext(upstreamVia: via, ownAddresses: [SIPViaAddress(transport: "UDP", host: "192.0.2.1", port: 5060), via],
                                      ownHosts: ["192.0.2.1"], branchKey: 7, upstreamHost: IPAddress("192.0.2.20")!,
                                      upstreamPort: 5060, upstreamAvailable: true, callerFromKey: SIPCallerFromKey(0x1234_5678, 0x9abc_def0))
        }
    }

    deinit {
        out.deallocate()
        fallback.deallocate()
        folder.cleanup()
    }

    static func compile(_ csv: String, to path: String) throws {
        let compiler = DirectoryCompiler()
        compiler.add(bytes: Array(csv.utf8), name: path + ".csv", format: .csv)
        switch compiler.finish() {
        case .failure(let failure): throw TestSupportError.failed(failure.diagnostics.map(\.description).joined(separator: "\n"))
        case .success(let content): try DirectoryWriter.write(content, to: path)
        }
    }

    /// What the answerer does with `bytes` from `ip`:`port`, and the bytes the action names.
    func send(_ bytes: [UInt8], from ip: String = "192.0.2.9", port: UInt16 = 5060, transport: ListenAddress.Transport = .udp,
              fromUpstream: Bool = false) -> Result {
        let source = MessageSource(ip: IPAddress(ip)!, port: port, transport: transport, fromUpstream: fromUpstream)
        let action = bytes.withUnsafeBytes { input in
            answerer.answer(input, from: source, set: set, proxy: proxy, now: now, into: out, fallback: fallback, log: &log)
        }
        switch action {
        case .none, .probeAnswered: return Result(action: action, bytes: [], fallback: [])
        case .reply(let n), .relay(let n, _): return Result(action: action, bytes: Array(out[0..<n]), fallback: [])
        case .forward(let n, let f): return Result(action: action, bytes: Array(out[0..<n]), fallback: Array(fallback[0..<f]))
        }
    }

    func count(_ counter: Counter) -> UInt64 { answerer.counters.value(counter) }

    struct Result {
        let action: Action
        let bytes: [UInt8]
        let fallback: [UInt8]
        var text: String { String(decoding: bytes, as: UTF8.self) }
        var status: String { text.components(separatedBy: "\r\n")[0] }
        var isReply: Bool { if case .reply = action { return true } else { return false } }
        var isForward: Bool { if case .forward = action { return true } else { return false } }
        /// The Contact values with lookupd's redirect mark taken out; one without the mark
        /// reads `UNMARKED <...>` (every Contact lookupd writes has it).
        var unmarkedContacts: [String] {
            header("Contact").map { value in
                guard let mark = value.range(of: #";lookupd=[0-9a-f]{16}>$"#, options: .regularExpression) else { return "UNMARKED " + value }
                return value.replacingCharacters(in: mark, with: ">")
            }
        }

        /// The values of header `name` (case-insensitive), in order.
        func header(_ name: String) -> [String] {
            text.components(separatedBy: "\r\n\r\n")[0].components(separatedBy: "\r\n").dropFirst().compactMap { line in
                guard let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == name.lowercased() else { return nil }
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
    }
}

/// Requests as a trunk sends them.
enum Requests {
    static func invite(from caller: String = "+8618600000000", to callee: String = "+8610123456",
                       extra: [String] = [], fromHeader: String? = nil, toTag: String? = nil, method: String = "INVITE",
                       cseqMethod: String? = nil, uri: String? = nil, version: String = "SIP/2.0",
                       callID: String = "a84b4c76e66710@192.0.2.9", branch: String = "z9hG4bK776asdhds") -> [UInt8] {
        let requestURI = uri ?? "sip:\(callee)@192.0.2.1"
        var lines = ["\(method) \(requestURI) \(version)",
                     "Via: SIP/2.0/UDP 192.0.2.9:5060;branch=\(branch);rport",
                     "Max-Forwards: 70",
                     fromHeader ?? "From: \"Trunk Caller\" <sip:\(caller)@192.0.2.9>;tag=1928301774",
                     "To: <sip:\(callee)@192.0.2.1>" + (toTag.map { ";tag=\($0)" } ?? ""),
                     "Call-ID: \(callID)",
                     "CSeq: 314159 \(cseqMethod ?? method)"]
        lines += extra
        return message(lines.joined(separator: "\n"))
    }

    static func request(_ method: String, extra: [String] = [], uri: String = "sip:+8610123456@192.0.2.1") -> [UInt8] {
        invite(extra: extra, method: method, uri: uri)
    }
}
