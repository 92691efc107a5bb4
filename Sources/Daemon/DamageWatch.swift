import Answering
import Directory

/// Notices a directory file served straight from disk (directory-copy = no)
/// that was truncated or rewritten in place, or that lost pages or failed a
/// block checksum, and says so once per file. Polled by the reload thread
/// every `JournalWatcher.interval` (a tenth of a second): one fstat per
/// served file, which is what "noticed within a second" costs.
///
/// A file changed in place is marked damaged: from then on every lookup in
/// it throws and its directory has no say (the caller gets unknown-response
/// unless another list knows them, and `lookupd_directory_damaged_lookups_total`
/// counts it), until another file is installed at its path (JournalWatcher
/// takes it in at its next poll) or a reload maps the file again.
///
/// Threading: the reload thread's only.
final class DamageWatch {
    private let logger: Logger
    /// Files already reported (strong: compared by identity, pruned to the set in use).
    private var reported: [DirectoryFile] = []

    init(logger: Logger) {
        self.logger = logger
    }

    func watch(_ set: ServingSet) {
        let directories = set.screening.directories
        reported.removeAll { file in !directories.contains { $0.file === file } }
        for directory in directories {
            let file = directory.file
            guard !reported.contains(where: { $0 === file }) else { continue }
            let why: String
            if let change = file.changeOnDisk() {
                file.markDamaged()
                why = "\(file.path) changed on disk while served: \(change)"
            } else if file.isDamaged {
                why = "\(file.path): a page of it could not be read (truncated in place, or a disk error)"
            } else if let damage = file.damage {
                why = damage.description
            } else {
                continue
            }
            reported.append(file)
            let scope = file.isDamaged ? "nothing is answered from it" : "lookups touching the damaged bytes are answered as if it did not know the caller"
            logger.error("directory \(directory.name): \(why); \(scope) until an intact file is installed at \(file.path) (rename a good one there, or lookupd reload)")
        }
    }
}
