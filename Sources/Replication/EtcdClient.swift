import CCurl
import Configuration
import Directory
import Glibc
import SystemCalls
import TextFormats

/// Why a call to etcd failed.
public struct EtcdFailure: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        /// No member with a quorum answered in time (down, unreachable, no
        /// leader, timed out): worth trying again later.
        case unavailable
        /// etcd answered and refused the request as such.
        case refused
        /// The token file cannot be read, or etcd refused its user and password.
        case credentials
    }

    public var kind: Kind
    /// What each attempt met, `URL: reason`.
    public var attempts: [String]
    /// Whether some attempt may have reached etcd and been acted on (a
    /// timeout after the request was sent): for a write, its fate is unknown.
    public var mayHaveApplied: Bool
    /// The gRPC status code of a refusal (-1 otherwise).
    public var code: Int = -1

    public var description: String {
        var seen: [String] = []
        for attempt in attempts where !seen.contains(attempt) { seen.append(attempt) }
        return seen.prefix(6).joined(separator: "; ") + (seen.count > 6 ? "; ..." : "")
    }
}

/// `USER:PASSWORD` from the token file.
struct EtcdCredentials: Sendable {
    var user: String
    var password: String

    static func read(_ path: String) throws(EtcdFailure) -> EtcdCredentials {
        func fail(_ why: String) -> EtcdFailure { EtcdFailure(kind: .credentials, attempts: [why], mayHaveApplied: false) }
        let bytes: [UInt8]
        do { bytes = try readRegularFile(path, maxBytes: 4096) } catch {
            throw fail("token file \(error)" + (error.code == EFBIG ? "; expected one line USER:PASSWORD" : ""))
        }
        var text = String(decoding: bytes, as: UTF8.self)
        while let last = text.last, last == "\n" || last == "\r\n" || last == "\r" { text.removeLast() }
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex, !text.contains("\n") else {
            throw fail("token file \(path): expected one line USER:PASSWORD")
        }
        return EtcdCredentials(user: String(text[..<colon]), password: String(text[text.index(after: colon)...]))
    }
}

/// Blocking calls to etcd's JSON gateway (`lookupd add` / `remove`), with
/// failover: each call tries the members in turn, starting with the last
/// one that answered, until one with a quorum answers or the deadline
/// passes. With a token file, it authenticates first and again when etcd
/// says the token expired.
///
/// Threading: one thread.
public final class EtcdClient {
    public let endpoints: [String]
    private let credentials: EtcdCredentials?
    private var token: String?
    private var preferred = 0
    /// One handle per member, so that calls reuse its connection.
    private var handles: [String: UnsafeMutableRawPointer] = [:]

    public init(_ config: ReplicationConfig) throws(EtcdFailure) {
        endpoints = config.endpoints
        credentials = try config.tokenFile.map { path throws(EtcdFailure) in try EtcdCredentials.read(path) }
    }

    deinit { for handle in handles.values { ccurl_easy_cleanup(handle) } }

    private func handle(_ endpoint: String) -> UnsafeMutableRawPointer? {
        if let handle = handles[endpoint] { return handle }
        guard EtcdTransfer.initialized, let handle = ccurl_easy_init() else { return nil }
        handles[endpoint] = handle
        return handle
    }

    /// Calls `path` (e.g. `/v3/kv/range`) with a JSON body; the answer's JSON.
    public func call(_ path: String, _ json: String, deadline: Double) throws(EtcdFailure) -> JSONValue {
        var attempts: [String] = [], maybe = false
        var reauthenticated = false
        while true {
            var i = 0
            while i < endpoints.count {
                let index = (preferred + i) % endpoints.count
                let endpoint = endpoints[index]
                let remaining = deadline - monotonicSeconds()
                guard remaining > 0.02 else {
                    throw EtcdFailure(kind: .unavailable, attempts: attempts + ["no answer within the time allowed"], mayHaveApplied: maybe)
                }
                if credentials != nil, token == nil {
                    guard try authenticate(endpoint, deadline: deadline, attempts: &attempts) else { i += 1; continue }
                }
                // A member that hangs (a leader that lost its quorum) must
                // not use up the whole time: leave some for the others.
                guard let transfer = EtcdTransfer(endpoint: endpoint, path: path, json: json, token: token, timeout: min(remaining, 2.0),
                                                  reusing: handle(endpoint)) else {
                    throw EtcdFailure(kind: .unavailable, attempts: [String(cString: ccurl_problem())], mayHaveApplied: false)
                }
                switch transfer.perform() {
                case .ok(let answer):
                    preferred = index
                    return answer
                case .failed(_, let status, let code, let message):
                    if code == GRPCCode.unauthenticated, credentials != nil, !reauthenticated {
                        // The token expired: authenticate again, same member.
                        token = nil
                        reauthenticated = true
                        continue
                    }
                    if code == GRPCCode.unavailable || status == 503 || status >= 500 && code < 0 {
                        attempts.append("\(endpoint): \(message)")
                        if !message.hasSuffix("no leader") { maybe = true }
                        i += 1
                        continue
                    }
                    throw EtcdFailure(kind: code == GRPCCode.unauthenticated || code == GRPCCode.permissionDenied ? .credentials : .refused,
                                      attempts: ["\(endpoint): \(message)"], mayHaveApplied: false, code: code)
                case .transport(_, let text, let timedOut, let sent):
                    attempts.append("\(endpoint): \(text)")
                    if timedOut || sent { maybe = true }
                    i += 1
                }
            }
            // A leader election takes about a second: pause, then go round again.
            let pause = min(0.1, deadline - monotonicSeconds())
            if pause > 0 { usleep(UInt32(pause * 1_000_000)) }
        }
    }

    /// False when this member could not be asked; throws when etcd refused the user.
    private func authenticate(_ endpoint: String, deadline: Double, attempts: inout [String]) throws(EtcdFailure) -> Bool {
        guard let credentials else { return true }
        let body = JSONValue.object([("name", .string(credentials.user)), ("password", .string(credentials.password))]).description
        guard let transfer = EtcdTransfer(endpoint: endpoint, path: "/v3/auth/authenticate", json: body, token: nil,
                                          timeout: min(max(0.02, deadline - monotonicSeconds()), 2.0)) else { return false }
        switch transfer.perform() {
        case .ok(let answer):
            token = answer["token"]?.stringValue
            if token == nil { attempts.append("\(endpoint): authentication answered without a token") }
            return token != nil
        case .failed(_, let status, let code, let message):
            if code == GRPCCode.unavailable || status >= 500 {
                attempts.append("\(endpoint): authentication: \(message)")
                return false
            }
            throw EtcdFailure(kind: .credentials, attempts: ["\(endpoint): authentication refused: \(message) (check the token file's USER:PASSWORD)"],
                              mayHaveApplied: false, code: code)
        case .transport(_, let text, _, _):
            attempts.append("\(endpoint): \(text)")
            return false
        }
    }
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Reading etcd's JSON: 64-bit numbers come as strings (proto3 JSON), and
/// fields holding their default value are left out.
extension JSONValue {
    var etcdInt: UInt64 {
        if let text = stringValue { return UInt64(text) ?? 0 }
        if let n = int64Value, n >= 0 { return UInt64(n) }
        return 0
    }

    var etcdBytes: [UInt8]? { stringValue.flatMap(Base64.decode) }
}
