import Directory
import Glibc
import Screening
import SystemCalls

/// Reads the `time-zone` of a configuration into `ZoneRules`, once per load, so that no
/// request ever consults (or changes) the process's local-time state.
///
/// A name is looked up as glibc looks up `TZ`: a file under the zoneinfo folder (`TZDIR`, else
/// /usr/share/zoneinfo), an absolute path, or `:NAME` for a file; otherwise a POSIX TZ string.
/// No zone configured means the system's: the `TZ` the process started with, else
/// /etc/localtime, else UTC.
public enum ZoneLoader {
    public static func load(_ zone: String?) throws(LoadError) -> ZoneRules {
        guard let zone else { return try system() }
        return try load(name: zone)
    }

    static func load(name: String) throws(LoadError) -> ZoneRules {
        if name.isEmpty { return .utc }
        var file = name
        if file.hasPrefix(":") { file.removeFirst() }
        let path = file.hasPrefix("/") ? file : ZoneRules.folder + "/" + file
        // A name that climbs out of the zoneinfo folder is no zone (glibc refuses it too).
        if !file.hasPrefix("/"), file.contains("..") {
            throw .zone(Diagnostic(file: name, line: 0, message: "not a time zone name"))
        }
        if FileSystem.isRegularFile(path) { return try read(path, name: name) }
        if name.hasPrefix(":") {
            throw .zone(Diagnostic(file: path, line: 0, message: "no such time zone file"))
        }
        if name == "UTC" || name == "GMT" { return .utc }
        guard let rules = ZoneRules(posix: name) else {
            throw .zone(Diagnostic(file: name, line: 0, message: "neither a file under \(ZoneRules.folder) nor a POSIX TZ string"))
        }
        return rules
    }

    static func read(_ path: String, name: String) throws(LoadError) -> ZoneRules {
        let bytes: [UInt8]
        do { bytes = try readRegularFile(path, maxBytes: ZoneRules.maxFileSize) } catch {
            throw .zone(Diagnostic(file: path, line: 0, message: error.message))
        }
        let parsed = bytes.withUnsafeBytes { raw in
            Result { () throws(ZoneError) in try ZoneRules(tzif: raw, name: name) }
        }
        switch parsed {
        case .success(let rules): return rules
        case .failure(let error): throw .zone(Diagnostic(file: path, line: 0, message: error.message))
        }
    }

    /// The zone the process runs in when none is configured.
    static func system() throws(LoadError) -> ZoneRules {
        if let tz = startupTZ.value { return try load(name: tz) }
        if FileSystem.isRegularFile("/etc/localtime") { return try read("/etc/localtime", name: "localtime") }
        return .utc
    }

    /// `TZ` as the process started, read once: lookupd never sets it.
    private struct Environment: Sendable { let value: String? }
    private static let startupTZ: Environment = Environment(value: getenv("TZ").map { String(cString: $0) })
}
