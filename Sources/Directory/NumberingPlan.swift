/// How numbers without a country code are read: the operator's home country,
/// its national trunk prefix and its international (exit) prefix.
///
/// Defaults are China's (+86, trunk prefix `0`, exit prefix `00`), where a
/// mobile number is also commonly written with no prefix at all (`13800138000`).
public struct NumberingPlan: Equatable, Sendable {
    /// Country calling code, 1 to 3 digits, no leading zero (e.g. 86).
    public var countryCode: UInt64
    /// Digits dialled before a national number (`0` in most countries, `1` in
    /// the NANP); may be empty where no trunk prefix exists.
    public var nationalPrefix: [UInt8]
    /// Digits dialled before a country code (`00`, `011` in the NANP).
    public var internationalPrefix: [UInt8]
    /// How many digits a national significant number (after the trunk prefix)
    /// may have. Shorter digit strings are internal extensions or service
    /// codes and are never turned into E.164.
    public var nationalNumberLength: ClosedRange<Int>

    public init(countryCode: UInt64 = 86, nationalPrefix: String = "0", internationalPrefix: String = "00",
                nationalNumberLength: ClosedRange<Int>? = nil) throws(NumberingPlanError) {
        guard countryCode >= 1, countryCode <= 999 else { throw .badCountryCode(String(countryCode)) }
        func digits(_ text: String, _ what: String) throws(NumberingPlanError) -> [UInt8] {
            let bytes = Array(text.utf8)
            guard bytes.count <= 4, bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                throw .badPrefix(what, text)
            }
            return bytes
        }
        self.countryCode = countryCode
        self.nationalPrefix = try digits(nationalPrefix, "national prefix")
        self.internationalPrefix = try digits(internationalPrefix, "international prefix")
        guard !self.internationalPrefix.isEmpty else { throw .badPrefix("international prefix", internationalPrefix) }
        if self.nationalPrefix.starts(with: self.internationalPrefix) {
            throw .ambiguousPrefixes(nationalPrefix, internationalPrefix)
        }
        let range = nationalNumberLength ?? NumberingPlan.typicalNationalLength(countryCode: countryCode)
        let ccDigits = PhoneNumber.digitCount(of: countryCode)
        guard range.lowerBound >= 3, range.upperBound + ccDigits <= PhoneNumber.maxDigits else {
            throw .badNationalLength(range)
        }
        self.nationalNumberLength = range
    }

    /// The shipped default: China.
    public static let china: NumberingPlan = try! NumberingPlan()

    /// National significant number lengths for common countries (ITU-T E.164
    /// national numbering plans); elsewhere a broad range that still refuses
    /// short internal extensions.
    public static func typicalNationalLength(countryCode: UInt64) -> ClosedRange<Int> {
        switch countryCode {
        case 1: return 10...10
        case 7: return 10...10
        case 33: return 9...9
        case 34: return 9...9
        case 39: return 6...11
        case 44: return 9...10
        case 49: return 6...13
        case 61: return 9...9
        case 81: return 9...10
        case 82: return 8...10
        case 86: return 10...11
        case 91: return 10...10
        default:
            return 6...(PhoneNumber.maxDigits - PhoneNumber.digitCount(of: countryCode))
        }
    }

    var countryCodeDigits: Int { PhoneNumber.digitCount(of: countryCode) }
}

public enum NumberingPlanError: Error, Equatable, Sendable, CustomStringConvertible {
    case badCountryCode(String)
    case badPrefix(String, String)
    case ambiguousPrefixes(String, String)
    case badNationalLength(ClosedRange<Int>)

    public var description: String {
        switch self {
        case .badCountryCode(let text):
            return "country code '\(text)' must be 1 to 3 digits without a leading zero"
        case .badPrefix(let what, let text):
            return "\(what) '\(text)' must be up to 4 digits"
        case .ambiguousPrefixes(let national, let international):
            return "national prefix '\(national)' must not start with the international prefix '\(international)'"
        case .badNationalLength(let range):
            return "national number length \(range.lowerBound)-\(range.upperBound) is out of range (at least 3, and with the country code at most 15 digits)"
        }
    }
}
