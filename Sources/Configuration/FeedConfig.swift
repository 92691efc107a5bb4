import Directory
import TextFormats

/// How a feed's download is packed.
public enum FeedCompression: String, Sendable, CaseIterable {
    /// Told by the first bytes: gzip (1f 8b), zip (PK\3\4 or an empty archive's PK\5\6), else none.
    case auto
    case none
    case gzip
    case zip
}

/// One `feed = NAME URL [options]` line: a list published over HTTP(S) that `lookupd update`
/// downloads, checks and compiles into a directory file.
public struct FeedConfig: Equatable, Sendable {
    /// Names state files and Prometheus labels, hence the restricted spelling.
    public var name: String
    public var url: String
    /// The directory file written; nil: `STATE-DIRECTORY/directories/NAME.lkd`.
    /// Several feeds may name the same file: they are merged, the first configured winning.
    public var into: String?
    /// Overrides the format told by the file (or archive member) name.
    public var format: SourceFormat?
    public var compression: FeedCompression = .auto
    /// Zip members to read, in this order; empty: every member whose name tells its format.
    public var members: [String] = []
    /// A small JSON document next to the list: version, size, count, sha256.
    public var manifest: String?
    /// Expected SHA-256 of the download (lowercase hex).
    public var sha256: String?
    /// Bytes allowed for the download and, separately, for the unpacked list.
    public var maxSize: Int64 = 1 << 30
    /// Seconds allowed for each download, from connect to the last byte.
    public var timeout: Int = 300
    /// A new list with fewer entries than this percentage below the installed one is refused.
    public var maxShrink: Int = 50
    /// How its CSV lists are read (`number-column=`, `label-column=`,
    /// `action-column=`, `action=`, `header=no`, `skip-invalid=yes`, `vanity=yes`).
    public var source = DirectoryCompiler.SourceOptions()

    public init(name: String, url: String) {
        self.name = name
        self.url = url
    }

    static let optionNames = ["into", "format", "compression", "members", "manifest", "sha256", "max-size", "timeout", "max-shrink",
                              "number-column", "label-column", "action-column", "action", "header", "skip-invalid", "vanity"]

    /// Parses the value of a `feed =` line; `resolve` makes `into=` paths absolute.
    static func parse(_ value: String, resolve: (String) -> String) throws(ConfigParser.ValueError) -> FeedConfig {
        let words = try ConfigParser.splitWords(value)
        guard words.count >= 2 else { throw ConfigParser.ValueError("expected NAME URL [options], e.g. feed = spamco https://feeds.example/spam.csv.gz") }
        guard isValidName(words[0]) else {
            throw ConfigParser.ValueError("feed name '\(words[0])': use letters, digits, '.', '_' and '-' (at most 64, starting with a letter or digit)")
        }
        guard let url = httpURL(words[1]) else { throw ConfigParser.ValueError("'\(words[1])' is not an http:// or https:// URL") }
        var feed = FeedConfig(name: words[0], url: url)
        var seen = Set<String>()
        for word in words.dropFirst(2) {
            guard let eq = word.firstIndex(of: "=") else { throw ConfigParser.ValueError("expected key=value after the URL, got '\(word)'") }
            let key = String(word[..<eq]), value = String(word[word.index(after: eq)...])
            guard optionNames.contains(key) else {
                throw ConfigParser.ValueError("unknown feed option '\(key)' (expected \(optionNames.map { $0 + "=" }.joined(separator: ", ")))")
            }
            guard seen.insert(key).inserted else { throw ConfigParser.ValueError("feed option \(key)= given twice") }
            guard !value.isEmpty else { throw ConfigParser.ValueError("\(key)= needs a value") }
            do { try feed.set(key, value, resolve: resolve) } catch {
                throw ConfigParser.ValueError("\(key)= \(error.message)")
            }
        }
        if feed.source.columns.namesColumns && feed.source.columns.number == nil {
            throw ConfigParser.ValueError("name the number column too (number-column=NAME or NUMBER)")
        }
        if feed.compression != .zip && feed.compression != .auto && !feed.members.isEmpty {
            throw ConfigParser.ValueError("members= only applies to zip archives (compression=zip or auto)")
        }
        return feed
    }

    /// A SHA-256 digest as 64 hexadecimal digits, in lowercase; nil when `text` is not one.
    public static func sha256Hex(_ text: String) -> String? {
        guard text.utf8.count == 64, text.utf8.allSatisfy({ TextInput.hexValue($0) != nil }) else { return nil }
        return text.lowercased()
    }

    /// One `key=value` option (the key known and given once, the value not empty).
    private mutating func set(_ key: String, _ value: String, resolve: (String) -> String) throws(ConfigParser.ValueError) {
        switch key {
        case "into":
            into = resolve(value)
        case "format":
            format = try ConfigParser.choice(value) as SourceFormat
        case "compression":
            compression = try ConfigParser.choice(value)
        case "members":
            let names = value.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard !names.contains(where: \.isEmpty) else { throw ConfigParser.ValueError("expected NAME[,NAME...]") }
            members = names
        case "manifest":
            guard let m = FeedConfig.httpURL(value) else { throw ConfigParser.ValueError("'\(value)' is not an http:// or https:// URL") }
            manifest = m
        case "sha256":
            guard let hex = FeedConfig.sha256Hex(value) else { throw ConfigParser.ValueError("expected 64 hexadecimal digits") }
            sha256 = hex
        case "max-size":
            guard let n = FeedConfig.parseByteSize(value), n >= 1024, n <= 1 << 40 else {
                throw ConfigParser.ValueError("expected bytes from 1024 to 1T, optionally with K, M or G (e.g. 200M)")
            }
            maxSize = n
        case "timeout":
            timeout = try ConfigParser.number(value, in: 1...86400, "seconds")
        case "max-shrink":
            maxShrink = try ConfigParser.number(value.hasSuffix("%") ? String(value.dropLast()) : value, in: 0...100, "a percentage")
        case "number-column", "label-column", "action-column":
            guard let column = CSVColumn(value) else { throw ConfigParser.ValueError("expects a header name or a column number (1 is the first)") }
            switch key {
            case "number-column": source.columns.number = column
            case "label-column": source.columns.label = column
            default: source.columns.action = column
            }
        case "action":
            guard let action = CSVRowAction(rawValue: value) else { throw ConfigParser.ValueError("must be block, identify or allow") }
            source.defaultAction = action
        case "header":
            source.columns.noHeader = try FeedConfig.yesNo(value) == false
        case "skip-invalid":
            source.skipInvalid = try FeedConfig.yesNo(value)
        case "vanity":
            source.vanity = try FeedConfig.yesNo(value)
        default:
            break
        }
    }

    static func yesNo(_ value: String) throws(ConfigParser.ValueError) -> Bool {
        switch value.lowercased() {
        case "yes", "true", "on": return true
        case "no", "false", "off": return false
        default: throw ConfigParser.ValueError("expects yes or no")
        }
    }

    static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...64).contains(bytes.count), isAlphanumeric(bytes[0]) else { return false }
        return bytes.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    private static func isAlphanumeric(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
    }

    /// The URL when it is http(s) with a host and nothing a request line could be split on.
    static func httpURL(_ text: String) -> String? {
        let lower = text.lowercased()
        let rest: Substring
        if lower.hasPrefix("http://") { rest = text.dropFirst(7) } else if lower.hasPrefix("https://") { rest = text.dropFirst(8) } else { return nil }
        guard let host = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first, !host.isEmpty else { return nil }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else { return nil }
        return text
    }

    /// `N`, `NK`, `NM`, `NG` or `NT` (powers of 1024).
    static func parseByteSize(_ text: String) -> Int64? {
        var digits = Substring(text)
        var scale: Int64 = 1
        if let last = digits.last, let power = ["K": 1, "M": 2, "G": 3, "T": 4][last.uppercased()] {
            scale = Int64(1) << (10 * power)
            digits = digits.dropLast()
        }
        guard let n = Int64(digits), n >= 0 else { return nil }
        let (product, overflow) = n.multipliedReportingOverflow(by: scale)
        return overflow ? nil : product
    }
}

extension LookupdConfig {
    /// The directory file `feed` is installed into.
    public func target(of feed: FeedConfig) -> String {
        if let into = feed.into { return into }
        let base = stateDirectory.hasSuffix("/") ? String(stateDirectory.dropLast()) : stateDirectory
        return "\(base)/directories/\(feed.name).lkd"
    }
}
