/// The formats `lookupd compile` reads.
public enum SourceFormat: String, CaseIterable, Sendable {
    /// `number,action,label` with a header line (`,` `;` or tab separated).
    case csv
    /// An array of `{"number", "action", "label"}` objects, the iOS-app style
    /// `{"phoneNum", "typeName"}`, or JSON Lines.
    case json
    /// One number (or `prefix*`) per line; each one is blocked.
    case text
    /// vCards: every TEL of a card identified with the card's name.
    case vcard

    /// The format named by a file's extension, if it names one.
    public static func guess(path: String) -> SourceFormat? {
        guard let dot = path.lastIndex(of: "."), !path[dot...].contains("/") else { return nil }
        switch path[path.index(after: dot)...].lowercased() {
        case "csv", "tsv": return .csv
        case "json", "jsonl", "ndjson": return .json
        case "txt", "text", "list", "lst": return .text
        case "vcf", "vcard": return .vcard
        default: return nil
        }
    }
}
