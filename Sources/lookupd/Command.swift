import Configuration
import Directory
import Glibc

let lookupdVersion = "0.1.0"

/// A subcommand: its name, a one-line summary, the full `--help` text, and
/// what it does (returning the exit status).
struct Command: Sendable {
    var name: String
    var summary: String
    var usage: String
    var run: @Sendable ([String]) throws -> Int32

    static var all: [Command] {
        [queryCommand, compileCommand, checkCommand, checkConfigCommand, inspectCommand, exportCommand, serveCommand, reloadCommand, statsCommand,
         addCommand, removeCommand, compactCommand, searchCommand, updateCommand, logCommand]
    }
}

/// Which configuration a command uses: `--config`, else `$LOOKUPD_CONFIG`,
/// else the system file if it exists, else the built-in defaults.
enum ConfigLocation {
    static let defaultPath = "/etc/lookupd/lookupd.conf"

    /// The config file path for commands that need a file (serve).
    static func path(explicit: String?) throws -> String {
        if let explicit { return explicit }
        if let env = getenv("LOOKUPD_CONFIG"), env.pointee != 0 { return String(cString: env) }
        if access(defaultPath, F_OK) == 0 { return defaultPath }
        throw CommandFailure("no configuration file: \(defaultPath) does not exist; pass --config FILE")
    }

    /// - Parameter required: fail when no file is found instead of using defaults.
    static func load(explicit: String?, required: Bool = false) throws -> LookupdConfig {
        var path = explicit
        if path == nil, let env = getenv("LOOKUPD_CONFIG"), env.pointee != 0 { path = String(cString: env) }
        if path == nil, access(defaultPath, F_OK) == 0 { path = defaultPath }
        guard let path else {
            if required {
                throw CommandFailure("no configuration file: \(defaultPath) does not exist; pass --config FILE")
            }
            return LookupdConfig()
        }
        do {
            return try ConfigParser.load(path: path)
        } catch {
            throw CommandFailure(error.description)
        }
    }
}

/// Options for the numbering plan shared by commands that read numbers.
enum PlanOptions {
    static let names: Set<String> = ["country", "country-code", "national-prefix", "international-prefix", "national-number-length"]

    static let help = """
      --country REGION         home country (CN, US, GB, IT, ...): its plan from
                               libphonenumber (default: the config's country)
      --country-code CC        home country code, or with --country a check
      --national-prefix D      trunk prefix, replacing the country's (empty: none)
      --international-prefix D international prefix, replacing the country's
      --national-number-length MIN[-MAX]
                               digits of a national number, replacing the country's
    """

    /// Applies command-line options to the config's plan: `--country` (or `--country-code`)
    /// replaces it and its overrides; the other options override on top.
    static func plan(_ base: NumberingPlan, _ args: Arguments) throws -> NumberingPlan {
        let country = try args.value("country")
        let cc = try args.value("country-code")
        let national = try args.value("national-prefix")
        let international = try args.value("international-prefix")
        let length = try args.value("national-number-length")
        if country == nil, cc == nil, national == nil, international == nil, length == nil { return base }
        let fresh = country != nil || cc != nil
        var range: ClosedRange<Int>? = fresh ? nil : base.nationalNumberLength
        if let length {
            let parts = length.split(separator: "-")
            guard parts.count == 1 || parts.count == 2, let lo = Int(parts[0]), let hi = Int(parts.last!), lo <= hi else {
                throw UsageError("--national-number-length expects MIN or MIN-MAX")
            }
            range = lo...hi
        }
        var countryCode: UInt64? = fresh ? nil : base.countryCode
        if let cc {
            guard let value = UInt64(cc), !cc.hasPrefix("0"), value >= 1, value <= 999 else { throw UsageError("--country-code expects 1 to 3 digits") }
            countryCode = value
        }
        func digits(_ o: [UInt8]?) -> String? { o.map { String(decoding: $0.map { $0 + 0x30 }, as: UTF8.self) } }
        do {
            return try NumberingPlan(region: country ?? (fresh ? nil : base.region), countryCode: countryCode,
                                     nationalPrefix: national ?? (fresh ? nil : digits(base.nationalPrefixOverride)),
                                     internationalPrefix: international ?? (fresh ? nil : digits(base.internationalPrefixOverride)),
                                     nationalNumberLength: range, isDefault: !fresh && base.isDefault)
        } catch {
            throw UsageError(error.description)
        }
    }

    /// The plan a command reads numbers under: the options', else the configuration's, else
    /// the one `directories` record; when none of them names one, the built-in default,
    /// announced on standard error (a plan is never assumed silently).
    static func resolve(_ config: LookupdConfig, _ args: Arguments, directories: [String] = []) throws -> NumberingPlan {
        let plan = try self.plan(config.plan, args)
        guard plan.isDefault else { return plan }
        for path in directories {
            guard let recorded = try? DirectoryFile(path: path).header.plan, !recorded.wasDefault else { continue }
            // The file's own plan, which its numbers were read under: not a default.
            if !recorded.hasOverrides, let from = try? NumberingPlan(region: recorded.region) { return from }
        }
        printNote("no numbering plan named (--country XX, or country = XX in the configuration): reading numbers under \(plan), the built-in default")
        return plan
    }
}
