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
         addCommand, removeCommand, compactCommand, updateCommand, logCommand]
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
    static let names: Set<String> = ["country-code", "national-prefix", "international-prefix", "national-number-length"]

    static let help = """
      --country-code CC        home country code (default: the config's, else 86)
      --national-prefix D      national trunk prefix (default: the config's, else 0)
      --international-prefix D international prefix (default: the config's, else 00)
      --national-number-length MIN[-MAX]
                               digits of a national number (default: by country)
    """

    /// Applies command-line overrides to the config's plan.
    static func plan(_ base: NumberingPlan, _ args: Arguments) throws -> NumberingPlan {
        let cc = try args.value("country-code")
        let national = try args.value("national-prefix")
        let international = try args.value("international-prefix")
        let length = try args.value("national-number-length")
        if cc == nil, national == nil, international == nil, length == nil { return base }
        var range: ClosedRange<Int>? = cc == nil ? base.nationalNumberLength : nil
        if let length {
            let parts = length.split(separator: "-")
            guard parts.count == 1 || parts.count == 2, let lo = Int(parts[0]), let hi = Int(parts.last!), lo <= hi else {
                throw UsageError("--national-number-length expects MIN or MIN-MAX")
            }
            range = lo...hi
        }
        var countryCode = base.countryCode
        if let cc {
            guard let value = UInt64(cc), !cc.hasPrefix("0") else { throw UsageError("--country-code expects 1 to 3 digits") }
            countryCode = value
        }
        do {
            return try NumberingPlan(countryCode: countryCode,
                                     nationalPrefix: national ?? String(decoding: base.nationalPrefix, as: UTF8.self),
                                     internationalPrefix: international ?? String(decoding: base.internationalPrefix, as: UTF8.self),
                                     nationalNumberLength: range)
        } catch {
            throw UsageError(error.description)
        }
    }
}
