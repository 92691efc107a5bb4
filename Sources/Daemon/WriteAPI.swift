import Addresses
import Configuration
import Directory
import Glibc
import Loading
import SystemCalls
import TextFormats
import TextRules

/// The write API on `http-listen` (`http-write-token-file`): what the PBX
/// calls to block or allow a number without a shell on this host.
///
///   POST   /v1/entries           {"number", "action": block|identify|allow, "label", "expires", "directory"}
///                                (allow: an allow entry, as `lookupd add --allow`)
///   DELETE /v1/entries/NUMBER[?directory=NAME]   (a removal, as `lookupd remove`)
///   GET    /v1/entries/NUMBER    what every directory and its journal hold for it
///
/// Every change goes through the journal exactly as `lookupd add` and
/// `remove` do (`DirectoryUpdates.apply`: locked, appended, fsync'd before
/// the answer), so the daemon's journal watcher applies it within 100 ms,
/// and it is logged with the client's address. Checks in order: the
/// listener's ACL (http-allow-from), this API's own (http-write-allow-from,
/// default loopback), the request rate (429), the bearer token (401,
/// compared in constant time; the file is read at every request so it can
/// be replaced without a reload), then the request itself.
///
/// Threading: the HTTP listener's thread only.
final class WriteAPI {
    static let prefix = "/v1/entries"
    /// The largest request body taken (413 beyond): a number, a label of at
    /// most 255 bytes, a few more fields.
    static let maxBody = 4096
    /// Requests per second over any 10 s, a burst of `burst` allowed: a PBX
    /// blocks a caller now and then; a client guessing tokens is slowed down.
    static let ratePerSecond = 20.0
    static let burst = 40.0
    /// Without http-write-allow-from: this host alone.
    static let loopback = [CIDR("127.0.0.0/8")!, CIDR("::1/128")!]

    struct Answer {
        var status: Int
        var reason: String
        var body: [UInt8]
        var contentType = "application/json"
        var extra = ""
    }

    private let logger: Logger
    private let clock: () -> Int64
    private var tokens = WriteAPI.burst
    private var refilledAt = monotonicNow()

    init(logger: Logger, clock: @escaping () -> Int64 = wallClockSeconds) {
        self.logger = logger
        self.clock = clock
    }

    static func handles(_ path: String) -> Bool { path == prefix || path.hasPrefix(prefix + "/") }

    func answer(method: String, path: String, query: [UInt8], body: [UInt8], authorization: String?, client: IPAddress,
                config: LookupdConfig) -> Answer {
        let operations = config.operations
        guard let tokenFile = operations.httpWriteTokenFile else {
            return text(404, "Not Found", "the write API is off (set http-write-token-file)\n")
        }
        let allowed = (operations.httpWriteAllowFrom ?? WriteAPI.loopback).contains { $0.contains(client) }
        guard allowed else { return text(403, "Forbidden", "source address not allowed to write (http-write-allow-from)\n") }
        guard takeToken() else {
            return text(429, "Too Many Requests", "more than \(Int(WriteAPI.ratePerSecond)) write requests a second\n", extra: "Retry-After: 1\r\n")
        }
        let token: [UInt8]
        do {
            token = trimmed(try readRegularFile(tokenFile, maxBytes: 4096))
        } catch {
            logger.error("write API: cannot read http-write-token-file \(tokenFile): \(error)")
            return text(503, "Service Unavailable", "the write API's token file cannot be read; see the daemon's log\n")
        }
        guard !token.isEmpty else {
            logger.error("write API: http-write-token-file \(tokenFile) is empty; every request is refused")
            return text(503, "Service Unavailable", "the write API's token file is empty\n")
        }
        guard let given = authorization.flatMap(bearer), WriteAPI.constantTimeEqual(given, token) else {
            logger.warning("write API: \(client) sent no or a wrong token")
            return text(401, "Unauthorized", "a valid bearer token is required (Authorization: Bearer TOKEN)\n",
                        extra: "WWW-Authenticate: Bearer realm=\"lookupd\"\r\n")
        }

        let rest = path.dropFirst(WriteAPI.prefix.count)
        let numberText: String? = rest.isEmpty ? nil : String(rest.dropFirst())
        let params: HTTPQuery
        switch HTTPQuery.parse(query) {
        case .failure(let e): return text(400, "Bad Request", e.message + "\n")
        case .success(let q): params = q
        }
        switch (method, numberText) {
        case ("POST", nil):
            return post(body, client: client, config: config)
        case ("DELETE", let number?):
            guard let pattern = pattern(percentDecoded(number), config) else { return invalidNumber(number) }
            let directory = params.value("directory").map { String(decoding: $0, as: UTF8.self) }
            return change([.remove(pattern)], directory: directory, client: client, config: config, created: false)
        case ("GET", let number?), ("HEAD", let number?):
            guard let pattern = pattern(percentDecoded(number), config) else { return invalidNumber(number) }
            return lookup(pattern, config: config)
        case (_, nil):
            return text(405, "Method Not Allowed", "POST \(WriteAPI.prefix) with a JSON body\n", extra: "Allow: POST\r\n")
        default:
            return text(405, "Method Not Allowed", "GET or DELETE \(WriteAPI.prefix)/NUMBER\n", extra: "Allow: GET, HEAD, DELETE\r\n")
        }
    }

    // MARK: - Requests

    private func post(_ body: [UInt8], client: IPAddress, config: LookupdConfig) -> Answer {
        let object: JSONValue
        do { object = try JSONValue.parse(body, maxDepth: 4) } catch {
            return text(400, "Bad Request", "the body is not JSON: \(error)\n")
        }
        guard let members = object.objectMembers else { return text(400, "Bad Request", "the body must be a JSON object\n") }
        let known: Set<String> = ["number", "action", "label", "expires", "directory"]
        if let unknown = members.first(where: { !known.contains($0.key) }) {
            return text(400, "Bad Request", "unknown field '\(unknown.key)' (expected number, action, label, expires, directory)\n")
        }
        guard let number = object["number"]?.stringValue else { return text(400, "Bad Request", "'number' (a string) is required\n") }
        guard let pattern = pattern(number, config) else { return invalidNumber(number) }
        let action = object["action"]?.stringValue ?? "block"
        var label: [UInt8]? = nil
        if let value = object["label"], !value.isNull {
            guard let string = value.stringValue else { return text(400, "Bad Request", "'label' must be a string\n") }
            if let problem = LabelRules.problem(string) { return text(400, "Bad Request", "label: \(problem)\n") }
            label = string.isEmpty ? nil : Array(string.utf8)
        }
        let now = clock()
        var expires: Int64 = 0
        if let value = object["expires"], !value.isNull {
            // Seconds from now as a number, or a duration or RFC 3339 time as a string.
            if let seconds = value.int64Value {
                guard seconds > 0, seconds <= 100 * 366 * 86400 else { return text(400, "Bad Request", "'expires' must be a positive number of seconds\n") }
                expires = now + seconds
            } else if let string = value.stringValue, let moment = TimeText.expiry(string, now: now) {
                expires = moment
            } else {
                return text(400, "Bad Request", "'expires': seconds, a duration (24h) or an RFC 3339 time (2026-12-01T18:00:00Z)\n")
            }
            guard expires > now else { return text(400, "Bad Request", "'expires' is not in the future\n") }
        }
        let directory = object["directory"]?.stringValue
        let request: DirectoryUpdates.Request
        switch action {
        case "block":
            request = .add(pattern, blocked: true, label: label, expires: expires)
        case "identify":
            guard label != nil else { return text(400, "Bad Request", "'identify' needs a label\n") }
            request = .add(pattern, blocked: false, label: label, expires: expires)
        case "allow":
            // An allow entry, as lookupd add --allow writes: no lower-priority directory blocks
            // the number. Taking a number out of the directory is DELETE, never this.
            request = .add(pattern, blocked: false, label: label, expires: expires, allowed: true)
        default:
            return text(400, "Bad Request", "unknown action '\(action)' (expected block, identify or allow)\n")
        }
        return change([request], directory: directory, client: client, config: config, created: true)
    }

    private func change(_ requests: [DirectoryUpdates.Request], directory name: String?, client: IPAddress, config: LookupdConfig,
                        created: Bool) -> Answer {
        guard let directory = self.directory(name, config) else {
            let names = config.directories.map(\.name).joined(separator: ", ")
            return text(404, "Not Found", name == nil ? "no directory is configured\n" : "no configured directory '\(name!)' (configured: \(names))\n")
        }
        let changes: [DirectoryUpdates.Change]
        do {
            changes = try DirectoryUpdates.apply(requests, directory: directory.path, now: clock())
        } catch {
            if case .notPresent = error.error {
                return text(404, "Not Found", "\(requests[0].pattern) is not in \(directory.name) or its journal\n")
            }
            logger.error("write API: \(client): \(requests[0].pattern) in \(directory.name): \(error.error)")
            return text(500, "Internal Server Error", "\(error.error)\n")
        }
        for (request, change) in zip(requests, changes) {
            let what: String
            if let addition = request.addition {
                let label = addition.label.map { ", label '\(String(decoding: $0, as: UTF8.self))'" } ?? ""
                let until = request.expires == 0 ? "" : " until \(TimeText.rfc3339(request.expires))"
                what = "\(request.allowed ? "allow" : addition.blocked ? "block" : "identify")\(label)\(until)"
            } else {
                what = "removed"
            }
            let record = change.record.map { "journal record \($0.sequence)" } ?? "already so, nothing written"
            logger.notice("write API: \(client) changed \(request.pattern) in \(directory.name): \(what) (\(record))")
        }
        var w = JSONWriter()
        ChangeJSON.write(requests, changes, directory: directory.name, path: directory.path, to: &w)
        let wrote = changes.contains { $0.record != nil }
        return Answer(status: created && wrote ? 201 : 200, reason: created && wrote ? "Created" : "OK", body: w.line)
    }

    private func lookup(_ pattern: NumberPattern, config: LookupdConfig) -> Answer {
        var w = JSONWriter()
        w.beginObject()
        w.field("number", pattern.description)
        w.key("directories")
        w.beginArray()
        let now = clock()
        for directory in config.directories {
            w.beginObject()
            w.field("directory", directory.name)
            w.field("path", directory.path)
            do {
                let file = try DirectoryFile(path: directory.path)
                let state = try JournalFollower.read(path: JournalFormat.path(forDirectory: directory.path))?.state ?? JournalState()
                w.key("entry")
                ChangeJSON.entry(&w, try DirectoryUpdates.stored(pattern, base: file, state: state, at: now))
                w.field("problem", nil as String?)
            } catch {
                w.key("entry")
                w.null()
                w.field("problem", "\(error)")
            }
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return Answer(status: 200, reason: "OK", body: w.line)
    }

    // MARK: - Parts

    private func directory(_ name: String?, _ config: LookupdConfig) -> DirectoryConfig? {
        guard let name else { return config.directories.first }
        return config.directories.first { $0.name == name }
    }

    private func pattern(_ text: String, _ config: LookupdConfig) -> NumberPattern? {
        guard text.utf8.count <= 256, case .success(let pattern) = NumberNormalizer(plan: config.plan).pattern(text) else { return nil }
        return pattern
    }

    private func invalidNumber(_ text: String) -> Answer {
        var w = JSONWriter()
        w.beginObject()
        w.field("error", "invalid number")
        w.field("number", String(text.prefix(256)))
        w.endObject()
        return Answer(status: 400, reason: "Bad Request", body: w.line)
    }

    private func text(_ status: Int, _ reason: String, _ message: String, extra: String = "") -> Answer {
        Answer(status: status, reason: reason, body: Array(message.utf8), contentType: "text/plain; charset=utf-8", extra: extra)
    }

    private func percentDecoded(_ text: String) -> String {
        // The path segment decodes like a query value, except that '+' stays a plus sign.
        let escaped = text.map { $0 == "+" ? "%2B" : String($0) }.joined()
        guard case .success(let q) = HTTPQuery.parse(Array(("n=" + escaped).utf8)), let value = q.value("n") else { return text }
        return String(decoding: value, as: UTF8.self)
    }

    private func trimmed(_ bytes: [UInt8]) -> [UInt8] {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else { return [] }
        return Array(bytes[first...last])
    }

    private func bearer(_ header: String) -> [UInt8]? {
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        return Array(String(parts[1]).trimmingCharacters(in: " \t").utf8)
    }

    private func takeToken() -> Bool {
        let now = monotonicNow()
        tokens = min(WriteAPI.burst, tokens + (now - refilledAt) * WriteAPI.ratePerSecond)
        refilledAt = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// Compares without an early exit, so the time taken tells nothing
    /// about how much of a guessed token was right (only its length).
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<max(a.count, b.count) {
            difference |= (i < a.count ? a[i] : 0) ^ (i < b.count ? b[i] : 0)
        }
        return difference == 0
    }
}
