import Configuration
import Directory

/// One list ready for the compiler: a file on disk, its format, and the name diagnostics show.
struct SourceFile {
    var name: String
    var path: String
    var format: SourceFormat
    /// The feed's column mapping and the like.
    var options = DirectoryCompiler.SourceOptions()
}

/// Turns a download (plain, gzip or zip) into the lists inside it.
enum FeedUnpacker {
    struct Unpacked {
        var sources: [SourceFile]
        var compression: FeedCompression
        var skipped: [String]
    }

    /// Unpacks `download` (fetched from `feed.url`) into `folder`, which must exist.
    static func unpack(_ download: String, feed: FeedConfig, into folder: String) throws(FeedError) -> Unpacked {
        let compression = feed.compression == .auto ? detect(download) : feed.compression
        let urlName = remoteFileName(feed.url)
        switch compression {
        case .auto, .none:
            guard let format = feed.format ?? SourceFormat.guess(path: urlName) else {
                throw FeedError("cannot tell the list's format from '\(urlName)'; add format=csv|json|text|vcard to the feed line")
            }
            return Unpacked(sources: [SourceFile(name: "\(feed.name):\(urlName)", path: download, format: format, options: feed.source)],
                            compression: .none, skipped: [])
        case .gzip:
            let inner = strippingSuffix(urlName, [".gz", ".gzip"])
            guard let format = feed.format ?? SourceFormat.guess(path: inner) else {
                throw FeedError("cannot tell the list's format from '\(urlName)'; add format=csv|json|text|vcard to the feed line")
            }
            let path = folder + "/unpacked"
            _ = try GzipInflater.inflate(download, to: path, maxSize: feed.maxSize)
            return Unpacked(sources: [SourceFile(name: "\(feed.name):\(inner)", path: path, format: format, options: feed.source)],
                            compression: .gzip, skipped: [])
        case .zip:
            let extracted = try ZipExtractor.extract(download, into: folder, members: feed.members, format: feed.format, maxSize: feed.maxSize)
            return Unpacked(sources: extracted.members.map { SourceFile(name: "\(feed.name):\($0.name)", path: $0.path, format: $0.format, options: feed.source) },
                            compression: .zip, skipped: extracted.skipped)
        }
    }

    /// gzip starts 1f 8b; a zip archive with a member "PK\3\4", an empty one "PK\5\6".
    static func detect(_ path: String) -> FeedCompression {
        let head = FileOperations.head(path, count: 4)
        if head.count >= 2, head[0] == 0x1F, head[1] == 0x8B { return .gzip }
        if head.count == 4, head[0] == 0x50, head[1] == 0x4B, (head[2] == 3 && head[3] == 4) || (head[2] == 5 && head[3] == 6) { return .zip }
        return .none
    }

    /// The last path segment of a URL, without query or fragment: `spam.csv.gz`.
    static func remoteFileName(_ url: String) -> String {
        var text = Substring(url)
        if let cut = text.firstIndex(where: { $0 == "?" || $0 == "#" }) { text = text[..<cut] }
        if let scheme = text.firstRange(of: "://") { text = text[scheme.upperBound...] }
        let segments = text.split(separator: "/", omittingEmptySubsequences: false)
        guard segments.count > 1, let last = segments.last, !last.isEmpty else { return "index" }
        return String(last)
    }

    private static func strippingSuffix(_ name: String, _ suffixes: [String]) -> String {
        for suffix in suffixes where name.lowercased().hasSuffix(suffix) { return String(name.dropLast(suffix.count)) }
        return name
    }
}
