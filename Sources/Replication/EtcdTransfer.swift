import CCurl
import Directory
import Glibc
import TextFormats

/// One POST to etcd's JSON gateway with libcurl: the request body, the
/// headers every call needs, and the answer collected as it arrives. A
/// unary call (range, txn, authenticate) collects its body; a watch hands
/// each chunk of its endless body to `stream` as it comes.
///
/// Performed either by `perform()` (blocking, the CLI) or inside a
/// `curl_multi` loop (the daemon's replication thread), which is why the
/// handle is public to this module.
///
/// Threading: one thread at a time.
final class EtcdTransfer {
    /// Per process, before any other libcurl call, while only one thread
    /// runs (Service.init and the CLI call it first).
    static let initialized: Bool = ccurl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    let endpoint: String
    let path: String
    let handle: UnsafeMutableRawPointer
    /// False for a handle lent by the caller (kept with its connection).
    private let ownsHandle: Bool
    private var headers: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    /// The body of a unary call.
    private(set) var body: [UInt8] = []
    /// Called with each chunk of a streamed body; returning false aborts the transfer.
    var stream: ((UnsafeRawBufferPointer) -> Bool)?
    /// A unary answer larger than this is refused (a range page is bounded
    /// by its limit; anything bigger is not etcd talking).
    static let maxBody = 64 << 20
    private(set) var tooLarge = false

    /// `timeout` bounds the whole call in seconds; 0 means none (a watch).
    /// `reusing`: a handle of the caller's whose open connection to the
    /// member is used again (it is reset, and not cleaned up here).
    init?(endpoint: String, path: String, json: String, token: String?, timeout: Double, connectTimeout: Double = 1.5,
          reusing: UnsafeMutableRawPointer? = nil) {
        guard EtcdTransfer.initialized, let handle = reusing ?? ccurl_easy_init() else { return nil }
        if reusing != nil { ccurl_easy_reset(handle) }
        ownsHandle = reusing == nil
        self.endpoint = endpoint
        self.path = path
        self.handle = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)

        headers = ccurl_slist_append(headers, "Content-Type: application/json")
        // No 100-continue round trip for larger bodies.
        headers = ccurl_slist_append(headers, "Expect:")
        // gRPC metadata through the gateway: a member that has lost its
        // leader answers at once ("no leader") instead of waiting, so the
        // client moves to a member that has one. (Its open watches stay
        // open, quiet: the engine's probe notices those.)
        headers = ccurl_slist_append(headers, "Grpc-Metadata-hasleader: true")
        if let token { headers = ccurl_slist_append(headers, "Authorization: \(token)") }

        (endpoint + path).withCString { _ = ccurl_set_pointer(handle, CURLOPT_URL, $0) }
        "http,https".withCString { _ = ccurl_set_pointer(handle, CURLOPT_PROTOCOLS_STR, $0) }
        _ = ccurl_set_long(handle, CURLOPT_POST, 1)
        json.withCString { _ = ccurl_set_pointer(handle, CURLOPT_COPYPOSTFIELDS, $0) }
        _ = ccurl_set_pointer(handle, CURLOPT_HTTPHEADER, headers)
        _ = ccurl_set_long(handle, CURLOPT_NOSIGNAL, 1)
        _ = ccurl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(connectTimeout * 1000)))
        if timeout > 0 { _ = ccurl_set_long(handle, CURLOPT_TIMEOUT_MS, max(1, Int(timeout * 1000))) }
        // A member that vanishes without closing the connection (power
        // off, partition) is noticed within about 10 s on an idle watch.
        _ = ccurl_set_long(handle, CURLOPT_TCP_KEEPALIVE, 1)
        _ = ccurl_set_long(handle, CURLOPT_TCP_KEEPIDLE, 4)
        _ = ccurl_set_long(handle, CURLOPT_TCP_KEEPINTVL, 2)
        _ = ccurl_set_long(handle, CURLOPT_TCP_NODELAY, 1)
        _ = ccurl_set_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer)
        _ = ccurl_set_pointer(handle, CURLOPT_USERAGENT, "lookupd")
        _ = ccurl_set_callback(handle, CURLOPT_WRITEFUNCTION, { data, size, count, context in
            Unmanaged<EtcdTransfer>.fromOpaque(context!).takeUnretainedValue().received(data!, size * count)
        })
        _ = ccurl_set_pointer(handle, CURLOPT_WRITEDATA, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        if ownsHandle { ccurl_easy_cleanup(handle) }
        ccurl_slist_free_all(headers)
        errorBuffer.deallocate()
    }

    /// Returning less than `count` makes libcurl abort the transfer.
    private func received(_ data: UnsafeMutablePointer<CChar>, _ count: Int) -> Int {
        let bytes = UnsafeRawBufferPointer(start: data, count: count)
        if let stream { return stream(bytes) ? count : 0 }
        guard body.count + count <= EtcdTransfer.maxBody else {
            tooLarge = true
            return 0
        }
        body.append(contentsOf: bytes)
        return count
    }

    /// Runs the call to its end on this thread.
    func perform() -> EtcdReply { finish(ccurl_easy_perform(handle)) }

    /// The outcome once libcurl reports the transfer done with `code`.
    func finish(_ code: CURLcode) -> EtcdReply {
        var status = 0
        ccurl_get_long(handle, CURLINFO_RESPONSE_CODE, &status)
        guard code == CURLE_OK else {
            let detail = String(cString: errorBuffer)
            var text = detail.isEmpty ? String(cString: ccurl_easy_strerror(code)) : detail
            // Short, stable texts for the common cases (curl's carry times).
            if code == CURLE_COULDNT_CONNECT { text = "cannot connect" }
            if code == CURLE_OPERATION_TIMEDOUT { text = "no answer in time" }
            if tooLarge { text = "answer larger than \(EtcdTransfer.maxBody) bytes" }
            // Refused or unresolvable: nothing was sent. A timeout or a
            // reset after sending: etcd may have acted on the request.
            let sent = !(code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_RESOLVE_PROXY)
            return .transport(endpoint: endpoint, text: text, timedOut: code == CURLE_OPERATION_TIMEDOUT, sent: sent)
        }
        return EtcdReply.answer(endpoint: endpoint, status: status, body: body)
    }
}

/// What etcd answered, or why it did not.
enum EtcdReply {
    /// HTTP 200 with a JSON object.
    case ok(JSONValue)
    /// An error answer from the gateway: gRPC status `code` and its message.
    case failed(endpoint: String, status: Int, code: Int, message: String)
    /// No answer: the connection failed or timed out.
    case transport(endpoint: String, text: String, timedOut: Bool, sent: Bool)

    static func answer(endpoint: String, status: Int, body: [UInt8]) -> EtcdReply {
        let json = try? JSONValue.parse(body, maxDepth: 32)
        if status == 200, let json, json.objectMembers != nil { return .ok(json) }
        // {"error": "...", "message": "...", "code": N} for unary calls.
        let message = json?["message"]?.stringValue ?? json?["error"]?.stringValue
            ?? "HTTP \(status): \(String(decoding: body.prefix(200), as: UTF8.self))"
        let code = json?["code"]?.int64Value.map(Int.init) ?? -1
        return .failed(endpoint: endpoint, status: status, code: code, message: DirectoryCompiler.printable(message, limit: 200))
    }
}

/// gRPC status codes etcd answers with (google.golang.org/grpc/codes).
enum GRPCCode {
    static let invalidArgument = 3
    static let outOfRange = 11
    static let unavailable = 14
    static let unauthenticated = 16
    static let failedPrecondition = 9
    static let permissionDenied = 7
}
