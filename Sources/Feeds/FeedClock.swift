import Glibc

/// Times as feeds show them, always UTC so that every host prints the same.
public enum FeedClock {
    /// `20240501120000`: a feed's version when its publisher gives none, and the directory
    /// version of a merged directory (digits only, so it fits the header's number).
    public static func stamp(_ seconds: Int64) -> String {
        let t = utc(seconds)
        return pad(Int(t.tm_year) + 1900, 4) + pad(Int(t.tm_mon) + 1, 2) + pad(Int(t.tm_mday), 2)
            + pad(Int(t.tm_hour), 2) + pad(Int(t.tm_min), 2) + pad(Int(t.tm_sec), 2)
    }

    /// `2024-05-01T12:00:00Z` (RFC 3339), or `never` for 0.
    public static func iso(_ seconds: Int64) -> String {
        guard seconds > 0 else { return "never" }
        let t = utc(seconds)
        return pad(Int(t.tm_year) + 1900, 4) + "-" + pad(Int(t.tm_mon) + 1, 2) + "-" + pad(Int(t.tm_mday), 2)
            + "T" + pad(Int(t.tm_hour), 2) + ":" + pad(Int(t.tm_min), 2) + ":" + pad(Int(t.tm_sec), 2) + "Z"
    }

    private static func utc(_ seconds: Int64) -> tm {
        var value = time_t(seconds)
        var out = tm()
        gmtime_r(&value, &out)
        return out
    }

    private static func pad(_ n: Int, _ width: Int) -> String {
        let s = String(n)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}
