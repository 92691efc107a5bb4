/// What the redress contacts of a 603+ answer (ATIS-1000099) may be. They are written inside
/// the quoted `text=` of a Reason header, as `;`-separated attribute-value pairs, so a value
/// that held `"`, `\`, `;`, a space or a control byte would end the string, forge a pair or
/// break the header; none is escaped, each is refused when the configuration is read.
public enum RedressRules {
    /// The longest contact accepted: the whole Reason header stays well inside one datagram.
    public static let maxBytes = 256

    /// `url=`: an https URL (the standard asks for one a caller can open).
    public static func urlProblem(_ text: String) -> String? {
        guard text.lowercased().hasPrefix("https://"), text.utf8.count > "https://".count else {
            return "expected an https:// URL"
        }
        return visibleProblem(text)
    }

    /// `tel=`: an E.164 number, `+` and 1 to 15 digits.
    public static func telProblem(_ text: String) -> String? {
        let digits = text.utf8.dropFirst()
        guard text.utf8.first == UInt8(ascii: "+"), (1...15).contains(digits.count),
              digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return "expected an E.164 number (+ and 1 to 15 digits, e.g. +18005550100)"
        }
        return nil
    }

    /// `email=`: an address, one `@` with something either side.
    public static func emailProblem(_ text: String) -> String? {
        let parts = text.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[1].contains("."), !parts[1].hasPrefix("."), !parts[1].hasSuffix(".") else {
            return "expected an address such as redress@example.net"
        }
        return visibleProblem(text)
    }

    /// A decision id (`id=`): 1 to 64 of `[A-Za-z0-9_-]`, so an operator can quote it on the
    /// phone and search a log for it without any escaping.
    public static func isDecisionID(_ bytes: some Collection<UInt8>) -> Bool {
        (1...64).contains(bytes.count) && bytes.allSatisfy(isDecisionIDByte)
    }

    public static func isDecisionIDByte(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
    }

    /// Printable ASCII only, none of the characters that end or split the quoted text.
    private static func visibleProblem(_ text: String) -> String? {
        guard text.utf8.count <= maxBytes else { return "longer than \(maxBytes) bytes" }
        for c in text.utf8 {
            if c <= 0x20 || c >= 0x7F { return "only printable ASCII, without spaces (percent-encode the rest)" }
            if c == 0x22 || c == 0x5C || c == 0x3B || c == 0x3C || c == 0x3E {
                return "'\(Character(Unicode.Scalar(c)))' cannot be carried in a Reason text (percent-encode it)"
            }
        }
        return nil
    }
}
