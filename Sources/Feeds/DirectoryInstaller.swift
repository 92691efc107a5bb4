import Directory
import Glibc

/// Puts a compiled directory in place of the one in force, keeping that one for rollback.
///
/// The order matters: the new file is written beside the target (`NAME.new`), mapped and
/// verified completely, the current file is kept as `NAME.previous` (a hard link, so it
/// costs nothing), and only then is the new file renamed over the target. A daemon
/// reloading at any moment finds the old complete file or the new complete file.
enum DirectoryInstaller {
    struct Installed {
        var numbers: Int
        var prefixRules: Int
        var keptPrevious: Bool
    }

    static func newPath(_ target: String) -> String { target + ".new" }
    static func previousPath(_ target: String) -> String { target + ".previous" }

    /// `write` writes the new file at the path it is given and says how
    /// many numbers and prefix rules it wrote.
    static func install(at target: String, write: (String) throws(FeedError) -> (numbers: Int, prefixRules: Int)) throws(FeedError) -> Installed {
        try FileOperations.makeFolders(FileOperations.folder(of: target))
        let staged = newPath(target)
        let compiled: (numbers: Int, prefixRules: Int)
        do {
            compiled = try write(staged)
        } catch {
            FileOperations.remove(staged)
            throw error
        }
        do {
            let file = try DirectoryFile(path: staged)
            try file.verify()
            guard file.count == compiled.numbers, file.prefixRuleCount == compiled.prefixRules else {
                throw DirectoryError.corrupt(path: staged, reason: "\(file.count) numbers written, \(compiled.numbers) compiled")
            }
        } catch {
            FileOperations.remove(staged)
            throw FeedError("the new directory file failed verification, not installed: \(error)")
        }
        let kept = FileOperations.isRegularFile(target)
        do {
            if kept { try FileOperations.preserve(target, as: previousPath(target)) }
            try FileOperations.move(staged, to: target)
        } catch {
            FileOperations.remove(staged)
            throw error
        }
        // The new file is in force; a failed fsync of its folder means it may not survive a
        // power cut, which the operator must hear about.
        do { try FileOperations.syncFolder(FileOperations.folder(of: target)) } catch {
            throw FeedError("\(target) was replaced, but \(error.message); it may not survive a power cut")
        }
        return Installed(numbers: compiled.numbers, prefixRules: compiled.prefixRules, keptPrevious: kept)
    }

    /// Exchanges the target and its previous version (so a second rollback undoes the first),
    /// after verifying the previous version completely. Returns its header.
    static func rollback(_ target: String) throws(FeedError) -> DirectoryHeader {
        let previous = previousPath(target)
        guard FileOperations.isRegularFile(previous) else {
            throw FeedError("no previous version to roll back to (\(previous) does not exist)")
        }
        let header: DirectoryHeader
        do {
            let file = try DirectoryFile(path: previous)
            try file.verify()
            header = file.header
        } catch {
            throw FeedError("the previous version is damaged, nothing changed: \(error)")
        }
        try FileOperations.swap(target, previous)
        return header
    }
}
