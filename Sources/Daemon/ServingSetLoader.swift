import Answering
import Configuration
import Directory
import Loading
import Screening
import SystemCalls

/// Loads serving sets (`Answering.ServingSet`): config file, contacts, directories (mapped,
/// or through private verified copies: DirectoryStore), the time zone. Used by the start-up and reload path only.
///
/// Threading: the reload thread's (start-up: the main thread's).
final class ServingSetLoader {
    let configPath: String
    let store: DirectoryStore
    private var generation: UInt64 = 0

    init(configPath: String, stateDirectory: String) {
        self.configPath = configPath
        self.store = DirectoryStore(folder: stateDirectory)
    }

    func prepare() throws(DirectoryError) { try store.prepare() }

    /// A fully verified new set, or an error saying why not (the caller
    /// keeps serving the old one).
    func load() throws(LoadFailure) -> (set: ServingSet, warnings: [Diagnostic], skipped: [Diagnostic]) {
        let config: LookupdConfig
        do { config = try ConfigParser.load(path: configPath) } catch { throw .config(error) }
        return try load(config)
    }

    func load(_ config: LookupdConfig) throws(LoadFailure) -> (set: ServingSet, warnings: [Diagnostic], skipped: [Diagnostic]) {
        // At start and at every reload: a listener beyond loopback needs its sources named.
        if let problem = config.exposureProblem { throw .config(Diagnostic(file: configPath, line: 0, message: problem)) }
        store.copies = config.directoryCopy
        let loaded: ScreeningLoader.Loaded
        do {
            // Journals are laid over by the JournalWatcher, which then follows them.
            loaded = try ScreeningLoader.load(config, verify: false, journals: false) { c throws(DirectoryError) in try store.open(c) }
        } catch {
            throw .load(error)
        }
        store.retain(only: config.directories.map(\.path))
        generation += 1
        let set = ServingSet(generation: generation, config: config, screening: loaded.set, zone: loaded.zone)
        return (set, loaded.warnings, loaded.skipped)
    }
}

extension ServingSetLoader {
    /// The set with other screening (a journal update, a compacted
    /// directory file), as the next generation.
    func derive(_ set: ServingSet, screening: ScreeningSet) -> ServingSet {
        generation += 1
        return set.with(screening: screening, generation: generation)
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
