import Foundation

/// ATIS-1000099's Reason header for a 603+ answer, as a grammar: `v=analytics1`, then the
/// redress contacts in the order url, tel, email (at least one), then `id`, all inside one
/// quoted-string, then RFC 8606's `location`. What a carrier's switch parsing it would accept.
public enum ATISReason {
    static let grammar = try! NSRegularExpression(pattern:
        #"^SIP;cause=603;text="v=analytics1(;url=https://[!#-:<-\[\]-~]+)?(;tel=\+[0-9]{1,15})?(;email=[!#-:<-?A-\[\]-~]+@[!#-:<-\[\]-~]+)?;id=([A-Za-z0-9_-]{1,64})";location=(LN|TN|LPN|RPN|RLN)$"#)

    /// Its Q.850 twin (`redress-q850`, RFC 3326/6432): cause 21, Call Rejected, the ISUP cause a
    /// 603 maps to, with the same quoted text and RFC 8606 location.
    static let q850Grammar = try! NSRegularExpression(pattern:
        #"^Q\.850;cause=21;text="v=analytics1(;url=https://[!#-:<-\[\]-~]+)?(;tel=\+[0-9]{1,15})?(;email=[!#-:<-?A-\[\]-~]+@[!#-:<-\[\]-~]+)?;id=([A-Za-z0-9_-]{1,64})";location=(LN|TN|LPN|RPN|RLN)$"#)

    /// The decision id when `reason` matches the grammar with at least one contact, else nil.
    public static func id(_ reason: String) -> String? { id(reason, grammar) }

    /// As `id`, for the Q.850 twin.
    public static func q850ID(_ reason: String) -> String? { id(reason, q850Grammar) }

    private static func id(_ reason: String, _ grammar: NSRegularExpression) -> String? {
        guard let m = grammar.firstMatch(in: reason, range: NSRange(reason.startIndex..., in: reason)),
              (1...3).contains(where: { m.range(at: $0).location != NSNotFound }) else { return nil }
        return String(reason[Range(m.range(at: 4), in: reason)!])
    }
}
