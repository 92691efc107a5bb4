import Directory
import Screening

/// Builds a `ScreeningSet` from a configuration: reads the contacts lists
/// and opens the directories, in priority order.
public enum ScreeningLoader {
    public struct Loaded: Sendable {
        public var set: ScreeningSet
        /// Skipped contacts and the like: worth logging, not fatal.
        public var warnings: [Diagnostic]
    }

    /// How a directory file becomes a `DirectoryFile`. The CLI opens the
    /// configured file in place; the daemon serves from a private copy.
    public typealias DirectoryOpener = (DirectoryConfig) throws(DirectoryError) -> DirectoryFile

    /// - Parameter verify: check every directory's content checksum and
    ///   structure before accepting it (what serving requires).
    public static func load(_ config: LookupdConfig, verify: Bool,
                            open: DirectoryOpener = { c throws(DirectoryError) in try DirectoryFile(path: c.path) }) throws(LoadError) -> Loaded {
        let normalizer = NumberNormalizer(plan: config.plan)
        var warnings: [Diagnostic] = []
        var lists: [ContactList] = []
        for path in config.contacts {
            guard let format = ContactsFormat.guess(path: path) else {
                throw .contacts(Diagnostic(file: path, line: 0, message: "cannot tell the format from the file name; name it .csv or .vcf"))
            }
            let file: MappedFile
            do { file = try MappedFile(path: path) } catch { throw .directory(error) }
            do {
                let parsed = try ContactList.parse(bytes: file.bytes, name: path, format: format, normalizer: normalizer)
                lists.append(parsed.list)
                warnings += parsed.warnings
            } catch {
                throw .contacts(error)
            }
        }
        var directories: [ScreeningDirectory] = []
        for entry in config.directories {
            let file: DirectoryFile
            do {
                file = try open(entry)
                if verify { try file.verify() }
            } catch {
                throw .directory(error)
            }
            directories.append(ScreeningDirectory(name: entry.name, file: file))
        }
        return Loaded(set: ScreeningSet(normalizer: normalizer, contacts: lists, directories: directories), warnings: warnings)
    }
}

public enum LoadError: Error, Sendable, CustomStringConvertible {
    case directory(DirectoryError)
    case contacts(Diagnostic)

    public var description: String {
        switch self {
        case .directory(let e): return e.description
        case .contacts(let d): return d.description
        }
    }
}
