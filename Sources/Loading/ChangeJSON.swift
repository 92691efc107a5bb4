import Directory
import TextFormats

/// The JSON of journal changes: what `lookupd add --json` and `remove
/// --json` print and the write API (/v1/entries) answers (lookupd(8), JSON
/// OUTPUT): the one place that shape is written.
public enum ChangeJSON {
    public static func write(_ requests: [DirectoryUpdates.Request], _ changes: [DirectoryUpdates.Change],
                             directory name: String, path: String, to w: inout JSONWriter) {
        w.beginObject()
        w.field("directory", name)
        w.field("path", path)
        w.field("written", changes.filter { $0.record != nil }.count)
        w.field("unchanged", changes.filter { $0.record == nil }.count)
        w.key("changes")
        w.beginArray()
        for (request, change) in zip(requests, changes) {
            w.beginObject()
            w.field("number", request.pattern.description)
            let outcome: String
            if request.addition == nil { outcome = "removed" } else if change.record == nil { outcome = "unchanged" } else {
                outcome = change.previous == nil ? "added" : "changed"
            }
            w.field("outcome", outcome)
            w.field("action", request.addition.map { request.allowed ? "allow" : $0.blocked ? "block" : "identify" } ?? "remove")
            w.field("label", bytes: request.addition?.label)
            expiry(&w, request.expires)
            w.field("record", change.record?.sequence)
            w.key("previous")
            entry(&w, change.previous)
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }

    /// An entry as {"action", "label", "record", "expires", "expires_at"}, or null.
    public static func entry(_ w: inout JSONWriter, _ entry: DirectoryUpdates.StoredEntry?) {
        guard let entry else { return w.null() }
        w.beginObject()
        w.field("action", entry.allowed ? "allow" : entry.blocked ? "block" : "identify")
        w.field("label", bytes: entry.label)
        w.field("record", entry.record)
        expiry(&w, entry.expires)
        w.endObject()
    }

    /// `expires` (seconds since 1970) and `expires_at` (RFC 3339), null for none.
    public static func expiry(_ w: inout JSONWriter, _ expires: Int64) {
        w.field("expires", expires == 0 ? nil : expires)
        w.field("expires_at", expires == 0 ? nil : TimeText.rfc3339(expires))
    }
}
