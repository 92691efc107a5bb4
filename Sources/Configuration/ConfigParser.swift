import Addresses
import Directory
import SystemCalls
import TextFormats
import TextRules
import Glibc
import Screening

/// Reads lookupd.conf: `key = value` lines, `#` comments (whole lines, or
/// after whitespace), values optionally in double quotes. Unknown keys,
/// repeated single keys and bad values are errors naming file and line.
/// Relative paths are taken relative to the folder holding the config file.
public enum ConfigParser {
    public struct ValueError: Error { public var message: String; init(_ m: String) { message = m } }

    struct State {
        var config = LookupdConfig()
        var folder: String
        var region: String? = nil
        var countryCode: UInt64? = nil
        var nationalPrefix: String? = nil
        var internationalPrefix: String? = nil
        var nationalLength: ClosedRange<Int>? = nil
        var allowFrom: [CIDR] = []
        var sawAllowFrom = false
        /// The first line that asks for 603+ (block-response, or a directory's own).
        var firstNetworkBlockedLine: Int?
        /// The line being read, and the line of each listen address so far.
        var line = 0
        var listenLines: [ListenAddress: Int] = [:]

        func resolve(_ path: String) -> String {
            if path.hasPrefix("/") || folder == "." { return path }
            return folder.hasSuffix("/") ? folder + path : folder + "/" + path
        }
    }

    /// Every accepted key, in the order the manual lists them.
    public static let keys: [ConfigKey] = [
        ConfigKey(name: "directory", syntax: "PATH [name=NAME] [block-response=603|607|608|603+] [block-treatment=\"TREATMENT\"] [active=WINDOWS]", repeatable: true,
                  summary: "A compiled directory file (.lkd). Repeat for several; the order is the priority order.") { s, v throws(ValueError) in
            var words = try splitWords(v)
            guard !words.isEmpty else { throw ValueError("expected a path") }
            var entry = DirectoryConfig(path: s.resolve(words.removeFirst()))
            for word in words {
                guard let eq = word.firstIndex(of: "=") else { throw ValueError("expected key=value after the path, got '\(word)'") }
                let key = String(word[..<eq]), value = String(word[word.index(after: eq)...])
                switch key {
                case "name":
                    guard !value.isEmpty else { throw ValueError("name= needs a value") }
                    entry.name = value
                case "block-response":
                    guard let r = BlockResponse(rawValue: value) else { throw ValueError("block-response must be \(alternatives(BlockResponse.self))") }
                    entry.blockResponse = r
                case "active":
                    entry.active = try parseActive(value)
                case "block-treatment":
                    entry.blockTreatment = try BlockTreatment.parse(value)
                default: throw ValueError("unknown directory option '\(key)' (expected name=, block-response=, block-treatment= or active=)")
                }
            }
            if entry.blockResponse != nil, entry.blockTreatment != nil {
                throw ValueError("give block-response= or block-treatment=, not both")
            }
            s.config.directories.append(entry)
        },
        ConfigKey(name: "contacts", syntax: "PATH [name-column=COLUMN] [number-column=COLUMN] [header=no]", repeatable: true,
                  summary: "A contacts list (.csv with name,number, a Google or Outlook contacts export, or .vcf). Contacts are never blocked and are labelled with their name. For a CSV file, name-column= and number-column= name its columns (a header name, or 1 for the first), header=no says its first line is data.") { s, v throws(ValueError) in
            // Options only when every word after the first is one: a path
            // with spaces still reads as written.
            let words = try splitWords(v)
            let options = words.dropFirst()
            guard words.count > 1, options.allSatisfy({ $0.contains("=") && contactOptions.contains(String($0[..<$0.firstIndex(of: "=")!])) }) else {
                s.config.contacts.append(s.resolve(try path(v)))
                return
            }
            var columns = CSVColumnMapping()
            for word in options {
                let eq = word.firstIndex(of: "=")!
                let key = String(word[..<eq]), value = String(word[word.index(after: eq)...])
                switch key {
                case "header":
                    switch value.lowercased() {
                    case "yes": columns.noHeader = false
                    case "no": columns.noHeader = true
                    default: throw ValueError("header= expects yes or no")
                    }
                default:
                    guard let column = CSVColumn(value) else { throw ValueError("\(key)= expects a header name or a column number (1 is the first)") }
                    if key == "name-column" { columns.label = column } else { columns.number = column }
                }
            }
            if columns.namesColumns, columns.number == nil || columns.label == nil {
                throw ValueError("name both columns: name-column= and number-column=")
            }
            let file = s.resolve(try path(words[0]))
            s.config.contacts.append(file)
            s.config.contactColumns[file] = columns
        },
        ConfigKey(name: "country", syntax: "REGION", repeatable: false,
                  summary: "Home country, an ISO 3166 region code (CN, US, GB, IT, DE, ...): its calling code, trunk prefix, international prefix and number lengths come from libphonenumber. Without it (and without country-code) numbers are read as CN's, the built-in default, and lookupd says so.") { s, v throws(ValueError) in
            guard v.count == 2, v.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) }) else {
                throw ValueError("expected a two-letter region code such as CN, US or IT")
            }
            s.region = v.uppercased()
        },
        ConfigKey(name: "country-code", syntax: "DIGITS", repeatable: false,
                  summary: "Home country calling code; with country it must agree, alone it picks the code's main region (1: US).") { s, v throws(ValueError) in
            guard let cc = UInt64(v), cc >= 1, cc <= 999, !v.hasPrefix("0") else { throw ValueError("expected 1 to 3 digits without a leading zero") }
            s.countryCode = cc
        },
        ConfigKey(name: "national-prefix", syntax: "DIGITS", repeatable: false,
                  summary: "Overrides the country's national (trunk) prefix and its parsing rules; empty for none.") { s, v throws(ValueError) in
            s.nationalPrefix = v
        },
        ConfigKey(name: "international-prefix", syntax: "DIGITS", repeatable: false,
                  summary: "Overrides the country's international (exit) prefixes with these digits.") { s, v throws(ValueError) in
            s.internationalPrefix = v
        },
        ConfigKey(name: "national-number-length", syntax: "MIN[-MAX]", repeatable: false,
                  summary: "Overrides the lengths a national number of the home country may have after the trunk prefix (default: the country's, from libphonenumber).") { s, v throws(ValueError) in
            let parts = v.split(separator: "-")
            guard parts.count == 1 || parts.count == 2, let lo = Int(parts[0]), let hi = Int(parts.last!), lo <= hi else {
                throw ValueError("expected MIN or MIN-MAX, e.g. 10-11")
            }
            s.nationalLength = lo...hi
        },
        ConfigKey(name: "attribution", syntax: "LANG | off", repeatable: false,
                  summary: "Attribution of numbers (region and carrier, from libphonenumber's offline data) in this language: zh, en, de, ... (default off). Shown by lookupd query --json and /lookup.json; with unknown-label = attribution also the label of unknown callers.") { s, v throws(ValueError) in
            if v == "off" { s.config.attribution = nil; return }
            guard Attribution.isLanguageTag(v) else { throw ValueError("expected a language code such as zh or en, or off") }
            s.config.attribution = v
        },
        ConfigKey(name: "attribution-carriers", syntax: "PATH | none", repeatable: false,
                  summary: "Folder of carrier names for attribution: python3-phonenumbers' carrierdata (default \(Attribution.defaultCarrierFolder)); none for regions only.") { s, v throws(ValueError) in
            guard !v.isEmpty else { throw ValueError("expected a folder or none") }
            s.config.attributionCarriers = v == "none" ? nil : s.resolve(v)
            s.config.attributionCarriersExplicit = v != "none"
        },
        ConfigKey(name: "unknown-label", syntax: "none | attribution", repeatable: false,
                  summary: "The label of callers no list knows: none (default) or attribution (their number's region and carrier; needs attribution). Contacts and directory labels always win.") { s, v throws(ValueError) in
            guard let label = UnknownLabel(rawValue: v) else { throw ValueError("expected none or attribution") }
            s.config.policies.unknownLabel = label
        },
        ConfigKey(name: "listen", syntax: "udp:HOST:PORT | tcp:HOST:PORT", repeatable: true,
                  summary: "SIP address to serve (IPv6 as udp:[::1]:5060). Repeat for several.") { s, v throws(ValueError) in
            guard let address = ListenAddress(v) else { throw ValueError("expected udp:HOST:PORT or tcp:HOST:PORT (IPv6 in brackets)") }
            // Each worker binds every listen address: a second socket of one address would
            // join the same SO_REUSEPORT group and the group's size would no longer be the
            // worker count that udp-steering = spread divides by.
            if let earlier = s.listenLines[address] { throw ValueError("\(address) is already listed on line \(earlier)") }
            s.listenLines[address] = s.line
            s.config.listen.append(address)
        },
        .choice("mode", \.config.mode,
                summary: "How verdicts are delivered: redirect answers every INVITE with a final response; proxy forwards calls not blocked to the upstream with the label in the caller's name (default redirect)."),
        ConfigKey(name: "workers", syntax: "N | auto", repeatable: false,
                  summary: "Worker threads (default auto: one per core).") { s, v throws(ValueError) in
            if v == "auto" { s.config.workers = nil; return }
            s.config.workers = try number(v, in: 1...256, "auto or a number")
        },
        .choice("udp-steering", \.config.udpSteering,
                summary: "Which worker gets a UDP datagram: flow (default), the kernel's hash of source and destination, so all of one SBC's calls over one flow go to one worker; spread, a random worker per datagram, so one flow uses every worker (redirect mode only: in proxy mode a call must stay on the worker that forwarded it). TCP connections are always spread by the kernel's hash."),
        ConfigKey(name: "allow-from", syntax: "CIDR[, CIDR...] | any", repeatable: true,
                  summary: "Sources answered; others are refused (see refuse-action). Required for a listen address beyond loopback: the addresses of your PBXs, or any to answer everyone.") { s, v throws(ValueError) in
            s.sawAllowFrom = true
            let (blocks, any) = try parseSources(v)
            s.allowFrom += blocks
            if any { s.config.allowFromAny = true }
        },
        .choice("refuse-action", \.config.refusalAction,
                summary: "What a source outside allow-from gets: 403 Forbidden (default) or silence."),
        ConfigKey(name: "trust-asserted-identity-from", syntax: "CIDR[, CIDR...]", repeatable: true,
                  summary: "Peers whose asserted identity (P-Asserted-Identity, Remote-Party-ID, P-Preferred-Identity, in identity-order) is taken as the caller instead of From.") { s, v throws(ValueError) in
            s.config.trustAssertedIdentityFrom += try parseCIDRs(v)
        },
        ConfigKey(name: "identity-order", syntax: "pai,rpid,ppi,from", repeatable: false,
                  summary: "For a peer in trust-asserted-identity-from: the identity headers the caller is read from, first present first (default pai,rpid,ppi,from; from last).") { s, v throws(ValueError) in
            s.config.identityOrder = try parseIdentityOrder(v)
        },
        .choice("block-response", \.config.blockResponse,
                summary: "Final response for blocked callers (default 603); a directory's own block-response= wins."),
        .choice("unknown-response", \.config.unknownResponse,
                summary: "Final response for callers no list knows (default 302 without a label)."),
        ConfigKey(name: "label-header", syntax: "NAME", repeatable: false,
                  summary: "Header carrying the label in answers (default X-Caller-Label).") { s, v throws(ValueError) in
            guard !v.isEmpty, v.utf8.count <= 64, v.utf8.allSatisfy(isTokenChar) else {
                throw ValueError("expected a header name (letters, digits, '-', at most 64 characters)")
            }
            s.config.labelHeader = v
        },
        .choice("label-escapes", \.config.labelEscapes,
                summary: "How \" and \\ in a label are written in SIP: escaped (keep, default), or as ' and / (replace: some phones, twinkle 1.10, drop calls whose display name holds an escaped backslash)."),
        .number("max-message-size", "BYTES", 1024...65507, \.config.maxMessageSize,
                summary: "Largest SIP message accepted (default 16384, at most 65507); larger ones are refused and counted."),
        ConfigKey(name: "control-socket", syntax: "PATH", repeatable: false,
                  summary: "Unix socket for lookupd stats and lookupd reload (default /run/lookupd/control.sock).") { s, v throws(ValueError) in
            guard !v.isEmpty, v.utf8.count < 100 else { throw ValueError("expected a path shorter than 100 bytes") }
            s.config.controlSocket = s.resolve(v)
        },
        .path("state-directory",
              summary: "Folder for the daemon's state (default /var/lib/lookupd): private copies of the directories with directory-copy = yes; lookupd update keeps feed state in its feeds/ folder.") { $0.config.stateDirectory = $1 },
        .flag("directory-copy", \.config.directoryCopy,
              summary: "Serve each directory from a private verified copy in state-directory (yes) instead of the installed file itself (no, default): the copy costs its size in disk and a full read at start and reload; without it a file changed in place is answered as unknown until a good one is installed."),
        ConfigKey(name: "log-level", syntax: "error | warning | notice | info | debug", repeatable: false,
                  summary: "Least important messages logged (default info: one line per blocked or identified call).") { s, v throws(ValueError) in
            guard let level = LogLevel(name: v) else { throw ValueError("expected error, warning, notice, info or debug") }
            s.config.logLevel = level
        },
        .number("tcp-max-connections", "N", 1...1_000_000, \.config.tcpMaxConnections,
                summary: "Open SIP TCP connections per worker before new ones are refused (default 4096)."),
        .number("tcp-idle-timeout", "SECONDS", 1...86400, unit: "seconds", \.config.tcpIdleTimeout,
                summary: "Close a SIP TCP connection idle this long, or one stuck mid-message (default 120)."),
    ] + screeningKeys + treatmentKeys + feedKeys + operationsKeys + proxyKeys + replicationKeys

    /// The largest lookupd.conf read: a configuration is a few kilobytes.
    public static let maxFileSize = 1 << 20

    /// Parses a config file (a regular file of at most `maxFileSize` bytes: the daemon reads
    /// it on every reload, and a FIFO or a device put in its place must fail the reload, not
    /// hang it or fill the memory).
    public static func load(path: String) throws(Diagnostic) -> LookupdConfig {
        let bytes: [UInt8]
        do { bytes = try readRegularFile(path, maxBytes: maxFileSize) } catch {
            throw Diagnostic(file: path, line: 0, message: error.message)
        }
        let result = bytes.withUnsafeBytes { raw in Result { () throws(Diagnostic) in try parse(bytes: raw, path: path) } }
        return try result.get()
    }

    public static func parse(_ text: String, path: String) throws(Diagnostic) -> LookupdConfig {
        var text = text
        let result = text.withUTF8 { buffer in
            Result { () throws(Diagnostic) in try parse(bytes: UnsafeRawBufferPointer(buffer), path: path) }
        }
        return try result.get()
    }

    public static func parse(bytes: UnsafeRawBufferPointer, path: String) throws(Diagnostic) -> LookupdConfig {
        let checked = check(bytes: bytes, path: path)
        if let first = checked.errors.first { throw first }
        return checked.config!
    }

    /// Every error of a configuration file at once (`lookupd check-config`):
    /// each line is read even after one failed; the checks of the whole
    /// file (numbering plan, screening, proxy) run when the lines were
    /// sound. The configuration when there was no error.
    public static func check(path: String) -> (config: LookupdConfig?, errors: [Diagnostic]) {
        let bytes: [UInt8]
        do { bytes = try readRegularFile(path, maxBytes: maxFileSize) } catch {
            return (nil, [Diagnostic(file: path, line: 0, message: error.message)])
        }
        return bytes.withUnsafeBytes { check(bytes: $0, path: path) }
    }

    public static func check(bytes: UnsafeRawBufferPointer, path: String) -> (config: LookupdConfig?, errors: [Diagnostic]) {
        var errors: [Diagnostic] = []
        let result = Result { () throws(Diagnostic) in try parseLines(bytes: bytes, path: path, errors: &errors) }
        switch result {
        case .success(let config): return errors.isEmpty ? (config, []) : (nil, errors)
        case .failure(let error): return (nil, errors + [error])
        }
    }

    private static func parseLines(bytes: UnsafeRawBufferPointer, path: String, errors: inout [Diagnostic]) throws(Diagnostic) -> LookupdConfig {
        let folder = DirectoryConfigPath.folder(of: path)
        var state = State(folder: folder)
        state.config.path = path
        var seen: [String: Int] = [:]
        guard UTF8Rules.isValid(bytes) else { throw Diagnostic(file: path, line: 0, message: "not valid UTF-8") }
        let text = String(decoding: bytes, as: UTF8.self)
        var lineNumber = 0
        // "\r\n" is a single Character in Swift: split on it too, or a
        // file with Windows line endings would read as one long line.
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            lineNumber += 1
            var line = Substring(rawLine)
            if line.last == "\r" { line = line.dropLast() }
            let content = stripComment(line).trimmed
            if content.isEmpty { continue }
            guard let eq = content.firstIndex(of: "=") else {
                errors.append(Diagnostic(file: path, line: lineNumber, message: "expected 'key = value'"))
                continue
            }
            let key = String(content[..<eq]).trimmed
            var value = String(content[content.index(after: eq)...]).trimmed
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\""), !value.dropFirst().dropLast().contains("\"") {
                value = String(value.dropFirst().dropLast())
            }
            guard let spec = keys.first(where: { $0.name == key }) else {
                errors.append(Diagnostic(file: path, line: lineNumber, message: "unknown key '\(key)'" + suggestion(for: key)))
                continue
            }
            if !spec.repeatable, let earlier = seen[key] {
                errors.append(Diagnostic(file: path, line: lineNumber, message: "'\(key)' is already set on line \(earlier); it may appear once"))
                continue
            }
            seen[key] = lineNumber
            state.line = lineNumber
            do {
                try spec.apply(&state, value)
                state.config.settings[key, default: []].append(value)
            } catch {
                errors.append(Diagnostic(file: path, line: lineNumber, message: "\(key): \(error.message)"))
            }
            if state.firstNetworkBlockedLine == nil, state.config.usesNetworkBlocked { state.firstNetworkBlockedLine = lineNumber }
        }
        // The checks of the whole file would only repeat what a bad line already said.
        guard errors.isEmpty else { return state.config }
        do {
            let named = state.region != nil || state.countryCode != nil
            state.config.plan = try NumberingPlan(region: state.region, countryCode: state.countryCode,
                                                  nationalPrefix: state.nationalPrefix, internationalPrefix: state.internationalPrefix,
                                                  nationalNumberLength: state.nationalLength, isDefault: !named)
        } catch {
            // Name the line of the key at fault, not just any plan key.
            let line: Int
            switch error {
            case .unknownRegion: line = seen["country"] ?? 0
            case .badCountryCode, .unknownCountryCode, .countryCodeMismatch: line = seen["country-code"] ?? 0
            case .badPrefix(let what, _):
                line = (what == "national prefix" ? seen["national-prefix"] : seen["international-prefix"]) ?? 0
            case .ambiguousPrefixes:
                line = [seen["national-prefix"], seen["international-prefix"]].compactMap { $0 }.max() ?? 0
            case .badNationalLength:
                line = seen["national-number-length"] ?? seen["country"] ?? seen["country-code"] ?? 0
            }
            throw Diagnostic(file: path, line: line, message: "\(error)")
        }
        if state.config.policies.unknownLabel == .attribution, state.config.attribution == nil {
            throw Diagnostic(file: path, line: seen["unknown-label"] ?? 0, message: "unknown-label = attribution needs 'attribution = LANG' (zh, en, ...)")
        }
        if state.sawAllowFrom { state.config.allowFrom = state.allowFrom }
        try finishScreening(&state, seen: seen, path: path)
        try finishProxy(&state, seen: seen, path: path)
        try finishReplication(&state, seen: seen, path: path)
        try finishTreatment(state, seen: seen, path: path)
        return state.config
    }

    static func stripComment(_ line: Substring) -> Substring {
        var inQuotes = false
        var previous: Character = " "
        for i in line.indices {
            let c = line[i]
            if c == "\"" { inQuotes.toggle() }
            if c == "#", !inQuotes, previous == " " || previous == "\t" { return line[..<i] }
            previous = c
        }
        return line
    }

    static let contactOptions: Set<String> = ["name-column", "number-column", "header"]

    static func splitWords(_ value: String) throws(ValueError) -> [String] {
        var words: [String] = []
        var current = ""
        var inQuotes = false
        var hasWord = false
        for c in value {
            if c == "\"" { inQuotes.toggle(); hasWord = true; continue }
            if !inQuotes, c == " " || c == "\t" {
                if hasWord { words.append(current); current = ""; hasWord = false }
                continue
            }
            current.append(c)
            hasWord = true
        }
        if inQuotes { throw ValueError("unterminated quote") }
        if hasWord { words.append(current) }
        return words
    }

    /// An allow list: address blocks, or `any` (every source, said on purpose).
    static func parseSources(_ value: String) throws(ValueError) -> (blocks: [CIDR], any: Bool) {
        if value.trimmed == "any" { return ([CIDR("::/0")!], true) }
        return (try parseCIDRs(value), false)
    }

    static func parseCIDRs(_ value: String) throws(ValueError) -> [CIDR] {
        var result: [CIDR] = []
        for part in value.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }) {
            guard let cidr = CIDR(String(part)) else { throw ValueError("'\(part)' is not an address or address block (e.g. 192.0.2.0/24, ::1)") }
            result.append(cidr)
        }
        guard !result.isEmpty else { throw ValueError("expected at least one address block") }
        return result
    }

    static func suggestion(for key: String) -> String {
        let best = keys.map { ($0.name, editDistance($0.name, key)) }.min { $0.1 < $1.1 }
        if let best, best.1 <= 3 { return " (did you mean '\(best.0)'?)" }
        return ""
    }

    public static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return row[b.count]
    }
}

enum DirectoryConfigPath {
    static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let folder = String(path[..<slash])
        return folder.isEmpty ? "/" : folder
    }
}

func isTokenChar(_ c: UInt8) -> Bool {
    switch c {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
         UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
        return true
    default:
        return false
    }
}

extension StringProtocol {
    var trimmed: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
