import CCurl
import Glibc
import SystemCalls

/// Validators from the last download, for a conditional request.
struct Validators: Equatable, Sendable {
    var etag = ""
    var lastModified = ""

    var isEmpty: Bool { etag.isEmpty && lastModified.isEmpty }
}

/// What a GET brought.
enum DownloadOutcome: Equatable {
    /// 304: the publisher has nothing newer than the validators sent.
    case notModified
    /// 200: the body is in the destination file.
    case downloaded(Download)
}

struct Download: Equatable {
    var size: Int64
    var sha256: String
    var validators: Validators
}

/// One HTTP(S) GET into a file with libcurl: a conditional request, a deadline for the
/// whole transfer, a size limit enforced on the bytes as they arrive (a missing or lying
/// Content-Length changes nothing), and the body hashed on the way to disk.
///
/// Why libcurl and not Foundation's URLSession (docs/FEEDS.md has the measurements): on
/// Linux, URLSession's resource timeout did not fire while a server trickled bytes, and a
/// cancel() issued from the data callback took effect megabytes later (or never, on a
/// transfer already buffered). Linking Foundation would also cost every lookupd command,
/// the daemon included, about 20 ms and 16 MB at start.
///
/// Threading: one transfer per call; the calling thread blocks until it ends.
enum HTTPDownload {
    /// Per process, before any other libcurl call, while only one thread runs.
    private static let initialized: Bool = ccurl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    /// Downloads `url` into `destination` (created or truncated).
    static func get(_ url: String, to destination: String, validators: Validators?, timeout: Int, maxSize: Int64,
                    userAgent: String) throws(FeedError) -> DownloadOutcome {
        guard initialized, let handle = ccurl_easy_init() else { throw FeedError(String(cString: ccurl_problem())) }
        defer { ccurl_easy_cleanup(handle) }
        let fd = try FileOperations.create(destination)
        let sink = TransferSink(fd: fd, maxSize: maxSize)
        defer { fd.close() }

        var headers: UnsafeMutablePointer<curl_slist>? = nil
        defer { ccurl_slist_free_all(headers) }
        if let validators {
            if !validators.etag.isEmpty { headers = ccurl_slist_append(headers, "If-None-Match: \(validators.etag)") }
            if !validators.lastModified.isEmpty { headers = ccurl_slist_append(headers, "If-Modified-Since: \(validators.lastModified)") }
        }
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        defer { errorBuffer.deallocate() }

        let secure = url.lowercased().hasPrefix("https:")
        let context = Unmanaged.passUnretained(sink).toOpaque()
        var rc = CURLE_OK
        func set(_ r: CURLcode) { if rc == CURLE_OK { rc = r } }
        url.withCString { set(ccurl_set_pointer(handle, CURLOPT_URL, $0)) }
        // Only http(s), and never from https down to http on a redirect.
        "http,https".withCString { set(ccurl_set_pointer(handle, CURLOPT_PROTOCOLS_STR, $0)) }
        (secure ? "https" : "http,https").withCString { set(ccurl_set_pointer(handle, CURLOPT_REDIR_PROTOCOLS_STR, $0)) }
        set(ccurl_set_long(handle, CURLOPT_FOLLOWLOCATION, 1))
        set(ccurl_set_long(handle, CURLOPT_MAXREDIRS, 5))
        set(ccurl_set_long(handle, CURLOPT_TIMEOUT, timeout))
        set(ccurl_set_long(handle, CURLOPT_CONNECTTIMEOUT, min(timeout, 30)))
        // libcurl signals timeouts with SIGALRM otherwise, in a process that may have threads.
        set(ccurl_set_long(handle, CURLOPT_NOSIGNAL, 1))
        // Refuses at once when the server announces a larger body; the sink enforces the limit
        // on bodies without (or with a false) Content-Length.
        set(ccurl_set_offset(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(maxSize)))
        set(ccurl_set_pointer(handle, CURLOPT_HTTPHEADER, headers))
        userAgent.withCString { set(ccurl_set_pointer(handle, CURLOPT_USERAGENT, $0)) }
        set(ccurl_set_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer))
        set(ccurl_set_callback(handle, CURLOPT_WRITEFUNCTION, { data, size, count, context in
            Unmanaged<TransferSink>.fromOpaque(context!).takeUnretainedValue().body(data!, size * count)
        }))
        set(ccurl_set_pointer(handle, CURLOPT_WRITEDATA, context))
        set(ccurl_set_callback(handle, CURLOPT_HEADERFUNCTION, { data, size, count, context in
            Unmanaged<TransferSink>.fromOpaque(context!).takeUnretainedValue().header(data!, size * count)
        }))
        set(ccurl_set_pointer(handle, CURLOPT_HEADERDATA, context))
        guard rc == CURLE_OK else { throw FeedError("cannot set up the request: \(String(cString: ccurl_easy_strerror(rc)))") }

        let result = ccurl_easy_perform(handle)
        var status = 0
        ccurl_get_long(handle, CURLINFO_RESPONSE_CODE, &status)
        if sink.tooLarge || result == CURLE_FILESIZE_EXCEEDED {
            throw FeedError("the download is larger than max-size=\(maxSize) bytes; refused")
        }
        if let error = sink.writeError {
            throw FeedError("cannot write \(destination): \(error)")
        }
        guard result == CURLE_OK else {
            let detail = String(cString: errorBuffer)
            let text = detail.isEmpty ? String(cString: ccurl_easy_strerror(result)) : detail
            switch result {
            case CURLE_OPERATION_TIMEDOUT:
                throw FeedError("download timed out after \(timeout) s (timeout=\(timeout)) after \(sink.bytes) bytes: \(text)")
            case CURLE_PARTIAL_FILE, CURLE_RECV_ERROR, CURLE_GOT_NOTHING:
                throw FeedError("download truncated after \(sink.bytes) bytes: \(text)")
            default:
                throw FeedError("download failed: \(text)")
            }
        }
        switch status {
        case 304:
            return .notModified
        case 200:
            try FileOperations.sync(fd, path: destination)
            return .downloaded(Download(size: sink.bytes, sha256: sink.hasher.finish(), validators: sink.validators))
        default:
            throw FeedError("the server answered HTTP \(status)\(sink.reason.isEmpty ? "" : " " + sink.reason) for \(url)")
        }
    }
}

/// Receives one transfer's headers and body (libcurl calls back on the performing thread).
private final class TransferSink {
    let fd: FileDescriptor
    let maxSize: Int64
    let hasher = SHA256Hasher()
    var bytes: Int64 = 0
    var tooLarge = false
    var writeError: Errno? = nil
    var validators = Validators()
    var reason = ""

    init(fd: FileDescriptor, maxSize: Int64) {
        self.fd = fd
        self.maxSize = maxSize
    }

    /// Returning less than `count` makes libcurl abort the transfer with a write error.
    func body(_ data: UnsafeMutablePointer<CChar>, _ count: Int) -> Int {
        guard Int64(count) <= maxSize - bytes else {
            tooLarge = true
            return 0
        }
        let raw = UnsafeRawBufferPointer(start: data, count: count)
        do { try fd.writeAll(raw) } catch {
            writeError = error
            return 0
        }
        hasher.update(raw)
        bytes += Int64(count)
        return count
    }

    /// One header line at a time, for every response of a redirect chain: a status line
    /// starts a new response and forgets what the previous one said.
    func header(_ data: UnsafeMutablePointer<CChar>, _ count: Int) -> Int {
        var line = String(decoding: UnsafeRawBufferPointer(start: data, count: count), as: UTF8.self)
        while let last = line.last, last == "\r" || last == "\n" || last == "\r\n" { line.removeLast() }
        if line.hasPrefix("HTTP/") {
            validators = Validators()
            let parts = line.split(separator: " ", maxSplits: 2)
            reason = parts.count == 3 ? String(parts[2]).prefix(80).description : ""
            return count
        }
        guard let colon = line.firstIndex(of: ":") else { return count }
        let name = line[..<colon].lowercased()
        let value = line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
        switch name {
        case "etag": validators.etag = String(value.prefix(512))
        case "last-modified": validators.lastModified = String(value.prefix(128))
        default: break
        }
        return count
    }
}
