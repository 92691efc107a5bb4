import Addresses
import Configuration
import Directory
import Loading
import Screening
import SystemCalls

/// Everything a worker needs to answer requests, loaded and verified as one
/// unit and swapped in whole on reload. Immutable: workers share it without
/// locks, and one that still holds the previous set finishes on it.
public final class ServingSet: Sendable {
    public let generation: UInt64
    public let config: LookupdConfig
    public let screening: ScreeningSet
    /// Per directory, in priority order: the response for numbers it blocks.
    public let blockResponses: [BlockResponse]
    /// Monotonic seconds when loaded.
    public let loadedAt: Double
    /// Now in the configured time zone, for `active=` windows.
    public let clock: ZoneClock

    init(generation: UInt64, config: LookupdConfig, screening: ScreeningSet, zone: ZoneRules) {
        self.generation = generation
        self.config = config
        self.screening = screening
        self.blockResponses = config.directories.map { $0.blockResponse ?? config.blockResponse }
        self.loadedAt = monotonicNow()
        self.clock = ZoneClock(rules: zone)
    }

    func isAllowed(_ address: IPAddress) -> Bool {
        guard let allow = config.allowFrom else { return true }
        for block in allow where block.contains(address) { return true }
        return false
    }

    func isTrusted(_ address: IPAddress) -> Bool {
        for block in config.trustAssertedIdentityFrom where block.contains(address) { return true }
        return false
    }
}

/// Loads serving sets: config file, contacts, directories through private
/// verified copies. Used by the start-up and reload path only.
final class ServingSetLoader {
    let configPath: String
    let store: PrivateDirectoryStore
    private var generation: UInt64 = 0

    init(configPath: String, stateDirectory: String) {
        self.configPath = configPath
        self.store = PrivateDirectoryStore(folder: stateDirectory)
    }

    func prepare() throws(DirectoryError) { try store.prepare() }

    /// A fully verified new set, or an error saying why not (the caller
    /// keeps serving the old one).
    func load() throws(LoadFailure) -> (set: ServingSet, warnings: [Diagnostic]) {
        let config: LookupdConfig
        do { config = try ConfigParser.load(path: configPath) } catch { throw .config(error) }
        return try load(config)
    }

    func load(_ config: LookupdConfig) throws(LoadFailure) -> (set: ServingSet, warnings: [Diagnostic]) {
        // At start and at every reload: a listener beyond loopback needs its sources named.
        if let problem = config.exposureProblem { throw .config(Diagnostic(file: configPath, line: 0, message: problem)) }
        let loaded: ScreeningLoader.Loaded
        do {
            // Journals are laid over by the JournalWatcher, which then follows them.
            loaded = try ScreeningLoader.load(config, verify: false, journals: false) { c throws(DirectoryError) in try store.open(c) }
        } catch {
            throw .load(error)
        }
        store.retain(only: config.directories.map(\.path))
        generation += 1
        return (ServingSet(generation: generation, config: config, screening: loaded.set, zone: loaded.zone), loaded.warnings)
    }
}

extension ServingSetLoader {
    /// The set with other screening (a journal update, a compacted
    /// directory file), as the next generation.
    func derive(_ set: ServingSet, screening: ScreeningSet) -> ServingSet {
        generation += 1
        return ServingSet(generation: generation, config: set.config, screening: screening, zone: set.clock.rules)
    }
}

enum LoadFailure: Error, CustomStringConvertible {
    case config(Diagnostic)
    case load(LoadError)

    var description: String {
        switch self {
        case .config(let d): return d.description
        case .load(let e): return e.description
        }
    }
}

/// The wall clock read in the serving set's time zone, for `active=` windows.
///
/// Threading: an immutable value; any worker may read it (the zone's rules are plain data,
/// nothing here touches the process's `TZ`).
public struct ZoneClock: Sendable {
    public let rules: ZoneRules

    /// Now, in the zone.
    public func now() -> LocalTime { rules.localTime(utc: wallClockSeconds()) }
}
