import CPhoneNumbers
import Glibc

/// Attribution of a number (号码归属地): the region libphonenumber's offline geocoder gives
/// (`北京市`, `Washington D.C.`, a country for a mobile number abroad) and the carrier the
/// carrier data names (`中国移动`), joined by a space: `北京市 中国移动`.
///
/// The region comes from libgeocoding's tables, read in place (they are part of the
/// library's mapping, so nothing is copied); country names from ICU, as the geocoder
/// shows them; carriers from python3-phonenumbers' data files (`CarrierData`), since
/// Debian's C++ library ships no carrier mapper. Lookups follow the libraries' rules
/// (longest prefix, the English fallback except for Chinese, Japanese and Korean, carriers
/// for mobile numbers only) and cost a few binary searches, no library call.
///
/// Threading: immutable; any number of threads may call it.
public final class Attribution: @unchecked Sendable {
    /// The language asked for (`zh`, `en`, `zh_Hant`).
    public let language: String
    /// Where the carrier names came from, with their version; nil when none were loaded.
    public let carrierSource: String?
    /// Why there are no carrier names, when there are none.
    public let carrierProblem: String?

    private let data: NumberingData
    /// Per calling code, the geocoding file in `language` and the English one to fall back on.
    private let primary: [Int16]
    private let fallback: [Int16]
    private let files: [GeoFile]
    /// Country names in `language`, by territory index (empty when ICU has none).
    private let regionNames: [[UInt8]]
    private let carriers: CarrierData?

    struct GeoFile {
        let prefixes: UnsafePointer<Int32>
        let descriptions: UnsafePointer<UnsafePointer<CChar>?>
        let count: Int
        /// Prefix lengths, longest first.
        let lengths: [Int]
    }

    /// Languages lookupd accepts: `zh`, `en`, `de`, `zh_Hant`, ...
    public static func isLanguageTag(_ text: String) -> Bool {
        let parts = text.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count <= 2, let base = parts.first, (2...3).contains(base.count),
              base.utf8.allSatisfy({ $0 >= 0x61 && $0 <= 0x7A }) else { return false }
        if parts.count == 2 {
            let script = parts[1]
            guard script.count == 4 || script.count == 2, script.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) }) else { return false }
        }
        return true
    }

    /// Debian's python3-phonenumbers carrier data.
    public static let defaultCarrierFolder = "/usr/lib/python3/dist-packages/phonenumbers/carrierdata"

    /// Which carrier data a folder holds, for `lookupd --version`.
    public static func describeCarrierData(_ folder: String) -> String {
        var st = stat()
        guard stat(folder, &st) == 0 else { return "none (\(folder) does not exist; python3-phonenumbers provides it)" }
        return "python3-phonenumbers \(CarrierData.packageVersion(folder) ?? "of unknown version") (\(folder))"
    }

    /// - Parameters:
    ///   - carrierFolder: python3-phonenumbers' `carrierdata` folder; nil for no carriers.
    ///   - carrierFolderRequired: fail (rather than note it) when that folder cannot be read.
    public init(language: String, carrierFolder: String? = Attribution.defaultCarrierFolder,
                carrierFolderRequired: Bool = false, data: NumberingData = .installed) throws(AttributionError) {
        guard Attribution.isLanguageTag(language) else { throw .badLanguage(language) }
        self.language = language
        self.data = data
        let base = String(language.split(separator: "_").first ?? Substring(language))
        var byName: [String: Int] = [:]
        var files: [GeoFile] = []
        for f in 0..<Int(lookupd_pn_geo_file_count()) {
            guard let name = lookupd_pn_geo_file_name(Int32(f)), let prefixes = lookupd_pn_geo_prefixes(Int32(f)),
                  let descriptions = lookupd_pn_geo_descriptions(Int32(f)) else { continue }
            var lengths = [Int32](repeating: 0, count: 16)
            let n = Int(lookupd_pn_geo_lengths(Int32(f), &lengths, 16))
            byName[String(cString: name)] = files.count
            files.append(GeoFile(prefixes: prefixes, descriptions: descriptions, count: Int(lookupd_pn_geo_entry_count(Int32(f))),
                                 lengths: lengths.prefix(min(n, 16)).map(Int.init).sorted(by: >)))
        }
        let mayFallBack = base != "zh" && base != "ja" && base != "ko"
        var primary = [Int16](repeating: -1, count: 1000)
        var fallback = [Int16](repeating: -1, count: 1000)
        var anyFile = false
        for cc in 1..<1000 {
            if let f = byName["\(cc)_\(language)"] ?? byName["\(cc)_\(base)"] {
                primary[cc] = Int16(f)
                anyFile = true
            }
            if mayFallBack, let f = byName["\(cc)_en"] { fallback[cc] = Int16(f) }
        }
        var names: [[UInt8]] = []
        var anyName = false
        var buffer = [CChar](repeating: 0, count: 256)
        for t in data.territories {
            let n = t.id == "001" ? 0 : Int(lookupd_pn_region_name(t.id, language, &buffer, 256))
            names.append(n > 0 ? buffer.prefix(n).map { UInt8(bitPattern: $0) } : [])
            if n > 0 { anyName = true }
        }
        guard anyFile || anyName else { throw .noData(language) }
        self.primary = primary
        self.fallback = fallback
        self.files = files
        self.regionNames = names
        if let carrierFolder {
            do {
                let carriers = try CarrierData(folder: carrierFolder, language: language)
                self.carriers = carriers
                carrierSource = "\(carrierFolder) (python3-phonenumbers \(carriers.version ?? "of unknown version"))"
                carrierProblem = nil
            } catch {
                if carrierFolderRequired { throw .carriers(error) }
                self.carriers = nil
                carrierSource = nil
                carrierProblem = "\(error)"
            }
        } else {
            carriers = nil
            carrierSource = nil
            carrierProblem = "no carrier data configured"
        }
    }

    /// The attribution of a number, or nil when its country's plan does not hold it (only
    /// valid numbers are attributed) or the data names nothing.
    public func describe(_ number: PhoneNumber) -> String? {
        withDescription(number) { $0.isEmpty ? nil : String(decoding: $0, as: UTF8.self) }
    }

    /// The attribution's UTF-8 bytes, empty when there is none; valid only inside `body`.
    public func withDescription<R>(_ number: PhoneNumber, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 512) { buffer in
            let n = write(number, into: buffer)
            return try body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[0..<n]))
        }
    }

    private func write(_ number: PhoneNumber, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        guard let (ccDigits, answer) = data.judge(number), answer.isValid else { return 0 }
        var length = 0
        func append(_ bytes: UnsafeRawBufferPointer) {
            guard !bytes.isEmpty else { return }
            if length > 0, length < out.count { out[length] = 0x20; length += 1 }
            let n = min(bytes.count, out.count - length)
            for i in 0..<n { out[length + i] = bytes[i] }
            length += n
        }
        withRegion(number, ccDigits: ccDigits, answer: answer) { append($0) }
        if answer.type.isMobile, let carriers { carriers.withName(number) { append($0) } }
        return length
    }

    /// GetDescriptionForNumber: the area of a geographic number, else (and when no area is
    /// known) its country, in `language`.
    private func withRegion<R>(_ number: PhoneNumber, ccDigits: Int, answer: ValidityAnswer,
                               _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let cc = Int(number.value / powersOfTen[number.digitCount - ccDigits])
        guard let code = data.callingCode(cc) else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        let geographic = answer.type == .fixedLine || answer.type == .fixedLineOrMobile
            || (answer.type == .mobile && data.mobileIsGeographical(cc))
        if geographic {
            var area = lookup(number, file: primary[cc])
            if area == nil || area?.pointee == 0 { area = lookup(number, file: fallback[cc]) }
            if let area, area.pointee != 0 { return try body(UnsafeRawBufferPointer(start: area, count: strlen(area))) }
        }
        // The country: the region GetRegionCodeForNumber assigns.
        guard answer.region != ValidityAnswer.none else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try regionNames[code.territory(Int(answer.region))].withUnsafeBytes(body)
    }

    /// The region part alone (what libphonenumber's geocoder says), for tests and checks.
    func regionDescription(_ number: PhoneNumber) -> String {
        guard let (ccDigits, answer) = data.judge(number), answer.isValid else { return "" }
        return withRegion(number, ccDigits: ccDigits, answer: answer) { String(decoding: $0, as: UTF8.self) }
    }

    /// The carrier part alone (what python3-phonenumbers' carrier.name_for_number says).
    func carrierName(_ number: PhoneNumber) -> String {
        guard let (_, answer) = data.judge(number), answer.isValid, answer.type.isMobile, let carriers else { return "" }
        return carriers.withName(number) { String(decoding: $0, as: UTF8.self) }
    }

    /// AreaCodeMap::Lookup: the longest prefix of the number the file holds.
    private func lookup(_ number: PhoneNumber, file index: Int16) -> UnsafePointer<CChar>? {
        guard index >= 0 else { return nil }
        let file = files[Int(index)]
        let digits = number.digitCount
        for length in file.lengths where length <= digits {
            let key = number.value / powersOfTen[digits - length]
            guard key <= UInt64(Int32.max) else { continue }
            let k = Int32(key)
            var lo = 0, hi = file.count
            while lo < hi {
                let mid = (lo + hi) >> 1
                if file.prefixes[mid] < k { lo = mid + 1 } else { hi = mid }
            }
            if lo < file.count, file.prefixes[lo] == k { return file.descriptions[lo] }
        }
        return nil
    }
}

public enum AttributionError: Error, CustomStringConvertible, Equatable {
    case badLanguage(String)
    case noData(String)
    case carriers(CarrierDataError)

    public var description: String {
        switch self {
        case .badLanguage(let text):
            return "'\(text)' is not a language code (zh, en, de, zh_Hant, ...)"
        case .noData(let language):
            return "libphonenumber has no geocoding data and ICU no region names in '\(language)'"
        case .carriers(let error):
            return "\(error)"
        }
    }
}
