/// How numbers without a country code are read: the operator's home region and what
/// libphonenumber says of it (calling code, trunk prefix and its parsing rules,
/// international prefixes, possible lengths), with the operator's explicit overrides on top
/// (docs/NUMBERING.md).
///
/// Numbers written with `+` or an international prefix are read under their own country's
/// plan whatever the home region is.
public struct NumberingPlan: Equatable, Sendable, CustomStringConvertible {
    /// ISO 3166 region code of the home country (`CN`, `US`, `IT`).
    public let region: String
    public let countryCode: UInt64
    /// `national-prefix`: the trunk prefix, replacing the region's parsing rules; empty
    /// for none. nil: the region's.
    public let nationalPrefixOverride: [UInt8]?
    /// `international-prefix`: the exit prefix, replacing the region's. nil: the region's.
    public let internationalPrefixOverride: [UInt8]?
    /// `national-number-length`: lengths a national number of the home country may have,
    /// replacing the region's. nil: the region's.
    public let nationalNumberLength: ClosedRange<Int>?
    /// Nobody named this plan: it is the built-in default (commands say so).
    public let isDefault: Bool

    let territory: Int
    let data: NumberingData

    /// The built-in default, China, used (and announced) when nothing names a plan.
    public static let china: NumberingPlan = {
        do { return try NumberingPlan(region: "CN", isDefault: true) } catch {
            fatalError("libphonenumber has no plan for CN: \(error)")
        }
    }()

    /// The plan of a region, with optional overrides. `countryCode` alone (no region)
    /// picks the main region of that code (`1` is US).
    public init(region: String? = nil, countryCode: UInt64? = nil, nationalPrefix: String? = nil,
                internationalPrefix: String? = nil, nationalNumberLength: ClosedRange<Int>? = nil,
                isDefault: Bool = false, data: NumberingData = .installed) throws(NumberingPlanError) {
        self.data = data
        var regionCode: String
        if let region {
            let upper = region.uppercased()
            guard let t = data.regionIndex[upper] else { throw .unknownRegion(region) }
            regionCode = upper
            let cc = UInt64(data.territories[t].countryCode)
            if let countryCode, countryCode != cc { throw .countryCodeMismatch(upper, cc, countryCode) }
        } else if let countryCode {
            guard countryCode >= 1, countryCode <= 999 else { throw .badCountryCode(String(countryCode)) }
            guard let main = data.mainTerritory(Int(countryCode)), main.id != "001" else {
                throw .unknownCountryCode(countryCode)
            }
            regionCode = main.id
        } else {
            regionCode = "CN"
        }
        guard let t = data.regionIndex[regionCode] else { throw .unknownRegion(regionCode) }
        self.region = regionCode
        territory = t
        self.countryCode = UInt64(data.territories[t].countryCode)
        func digits(_ text: String, _ what: String) throws(NumberingPlanError) -> [UInt8] {
            let bytes = Array(text.utf8)
            guard bytes.count <= 4, bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                throw .badPrefix(what, text)
            }
            return bytes.map { $0 - 0x30 }
        }
        // An explicit key equal to the region's own value changes nothing: `national-prefix
        // = 0` for CN keeps CN's rules (which also strip carrier selection codes).
        let territory = data.territories[t]
        var national = try nationalPrefix.map { text throws(NumberingPlanError) in try digits(text, "national prefix") }
        if let n = national, !n.isEmpty, nationalPrefix == territory.nationalPrefix { national = nil }
        var international = try internationalPrefix.map { text throws(NumberingPlanError) in
            let d = try digits(text, "international prefix")
            guard !d.isEmpty else { throw .badPrefix("international prefix", text) }
            return d
        }
        if internationalPrefix != nil, internationalPrefix == territory.internationalPrefixPattern { international = nil }
        // A trunk prefix that starts with the exit prefix would never be read as a trunk prefix.
        let effectiveNational = national ?? territory.nationalPrefix.map { Array($0.utf8).map { $0 - 0x30 } } ?? []
        if let i = international, !effectiveNational.isEmpty, effectiveNational.starts(with: i) {
            throw .ambiguousPrefixes(nationalPrefix ?? territory.nationalPrefix ?? "", internationalPrefix ?? "")
        }
        nationalPrefixOverride = national
        internationalPrefixOverride = international
        if let range = nationalNumberLength {
            let ccDigits = PhoneNumber.digitCount(of: self.countryCode)
            guard range.lowerBound >= 2, range.upperBound + ccDigits <= PhoneNumber.maxDigits else {
                throw .badNationalLength(range)
            }
        }
        self.nationalNumberLength = nationalNumberLength
        self.isDefault = isDefault
        // The home calling code is read most: build its automata now rather than on the
        // first call.
        _ = data.callingCode(Int(self.countryCode))
    }

    public static func == (a: NumberingPlan, b: NumberingPlan) -> Bool {
        a.region == b.region && a.countryCode == b.countryCode && a.nationalPrefixOverride == b.nationalPrefixOverride
            && a.internationalPrefixOverride == b.internationalPrefixOverride && a.nationalNumberLength == b.nationalNumberLength
    }

    var home: Territory { data.territories[territory] }

    /// Whether any explicit key changed the region's plan.
    public var hasOverrides: Bool {
        nationalPrefixOverride != nil || internationalPrefixOverride != nil || nationalNumberLength != nil
    }

    /// The trunk prefix as dialled (`0`, `1`), nil when the plan has none.
    public var nationalPrefix: String? {
        if let o = nationalPrefixOverride { return o.isEmpty ? nil : String(decoding: o.map { $0 + 0x30 }, as: UTF8.self) }
        return home.nationalPrefix
    }

    /// The exit prefix as dialled (`00`, `011`, `8~10`) or the region's pattern.
    public var internationalPrefix: String? {
        if let o = internationalPrefixOverride { return String(decoding: o.map { $0 + 0x30 }, as: UTF8.self) }
        return home.internationalPrefixForDisplay
    }

    /// National number lengths in force for the home country.
    var homeLengths: LengthSet {
        if let r = nationalNumberLength {
            var bits: UInt32 = 0
            for n in r where n < 32 { bits |= 1 << UInt32(n) }
            return LengthSet(bits: bits)
        }
        return home.possibleLengths
    }

    /// `CN (+86, trunk prefix 0, international prefix 00)`.
    public var description: String {
        var parts = ["+\(countryCode)"]
        parts.append(nationalPrefix.map { "trunk prefix \($0)" } ?? "no trunk prefix")
        if let i = internationalPrefix { parts.append("international prefix \(i)") }
        if nationalNumberLength != nil { parts.append("national numbers of \(homeLengths.text) digits") }
        return "\(region) (\(parts.joined(separator: ", ")))"
    }

    /// The fingerprint of what this plan reads differently from another: region, calling
    /// code and overrides (recorded in directory files, docs/FORMAT.md).
    public var settingsFingerprint: UInt32 {
        var text = "\(region) \(countryCode)"
        text += " n=" + (nationalPrefixOverride.map { $0.map(String.init).joined() } ?? "-")
        text += " i=" + (internationalPrefixOverride.map { $0.map(String.init).joined() } ?? "-")
        text += " l=" + (nationalNumberLength.map { "\($0.lowerBound)-\($0.upperBound)" } ?? "-")
        return UInt32(truncatingIfNeeded: Array(text.utf8).withUnsafeBytes { XXH64.hash($0) })
    }
}

public enum NumberingPlanError: Error, Equatable, Sendable, CustomStringConvertible {
    case unknownRegion(String)
    case badCountryCode(String)
    case unknownCountryCode(UInt64)
    case countryCodeMismatch(String, UInt64, UInt64)
    case badPrefix(String, String)
    case ambiguousPrefixes(String, String)
    case badNationalLength(ClosedRange<Int>)

    public var description: String {
        switch self {
        case .unknownRegion(let text):
            return "'\(text)' is not a region libphonenumber knows (an ISO 3166 code such as CN, US, GB, IT, DE)"
        case .badCountryCode(let text):
            return "country code '\(text)' must be 1 to 3 digits without a leading zero"
        case .unknownCountryCode(let cc):
            return "no country has calling code \(cc)"
        case .countryCodeMismatch(let region, let actual, let given):
            return "country code \(given) is not \(region)'s (+\(actual)); drop country-code or fix it"
        case .badPrefix(let what, let text):
            return "\(what) '\(text)' must be up to 4 digits"
        case .ambiguousPrefixes(let national, let international):
            return "national prefix '\(national)' must not start with the international prefix '\(international)'"
        case .badNationalLength(let range):
            return "national number length \(range.lowerBound)-\(range.upperBound) is out of range (at least 2, and with the country code at most 15 digits)"
        }
    }
}
