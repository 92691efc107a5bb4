import Configuration
import TextFormats

/// The small JSON document a publisher puts next to its list:
///
///     {"version": "2024.05.01", "size": 1234567, "count": 40321, "sha256": "9f86d0..."}
///
/// `size` and `sha256` describe the file as downloaded (compressed, if it is); `count` is the
/// number of entries in the list. Every field is optional, others are ignored, but a
/// manifest naming none of these four says nothing and is refused.
struct FeedManifest: Equatable {
    var version: String?
    var size: Int64?
    var count: Int?
    var sha256: String?

    static let maxBytes = 1 << 20

    static func parse(_ bytes: [UInt8]) throws(FeedError) -> FeedManifest {
        let value: JSONValue
        do { value = try JSONValue.parse(bytes) } catch { throw FeedError("the manifest is not valid JSON: \(error)") }
        guard value.objectMembers != nil else { throw FeedError("the manifest is not a JSON object") }
        var manifest = FeedManifest()
        if let v = value["version"], !v.isNull {
            guard let text = v.stringValue ?? v.numberLexeme, !text.isEmpty, text.utf8.count <= 128,
                  text.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F }) else {
                throw FeedError("the manifest's version must be a string or number of at most 128 printable characters")
            }
            manifest.version = text
        }
        if let v = value["size"], !v.isNull {
            guard let n = v.int64Value, n >= 0 else { throw FeedError("the manifest's size must be a whole number of bytes") }
            manifest.size = n
        }
        if let v = value["count"] ?? value["entries"], !v.isNull {
            guard let n = v.int64Value, n >= 0, n <= Int64(Int.max) else { throw FeedError("the manifest's count must be a whole number") }
            manifest.count = Int(n)
        }
        if let v = value["sha256"], !v.isNull {
            guard let text = v.stringValue, let hex = FeedConfig.sha256Hex(text) else {
                throw FeedError("the manifest's sha256 must be 64 hexadecimal digits")
            }
            manifest.sha256 = hex
        }
        guard manifest.version != nil || manifest.size != nil || manifest.count != nil || manifest.sha256 != nil else {
            throw FeedError("the manifest names none of version, size, count and sha256")
        }
        return manifest
    }
}
