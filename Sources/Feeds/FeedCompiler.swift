import Directory
import Glibc
import SystemCalls

/// Compiles feed lists with `DirectoryCompiler`, as `lookupd compile` does.
///
/// A number listed twice keeps its first listing: within a list the first line, across
/// feeds merged into one directory the first configured feed. Publishers' lists are often
/// untidy, and one duplicate must not keep a whole update out.
struct FeedCompiler {
    let plan: NumberingPlan

    /// Diagnostics quoted in an error before "... and N more".
    static let quotedDiagnostics = 5

    /// Compiles one feed's lists alone: proves every line valid (or, with
    /// skip-invalid=yes, counts the lines left out) and counts the entries.
    /// Entries beyond the memory budget are sorted in runs in `work`.
    func count(_ sources: [SourceFile], work: String) throws(FeedError) -> (entries: Int, warnings: [Diagnostic], warningCount: Int) {
        let compiler = makeCompiler(version: 0, temporaryFolder: work)
        try add(sources, to: compiler)
        let outcome: Result<DirectoryCompiler.Written, CompileFailure>
        do { outcome = try compiler.check() } catch { throw FeedError("\(error)") }
        _ = try result(outcome)
        return (compiler.entriesKept, compiler.warnings, compiler.warningCount)
    }

    /// Compiles the lists of several feeds, in priority order, into the
    /// directory file `path` (bounded memory: runs are sorted beside it), in
    /// directory format `fileFormat`.
    func build(_ sources: [SourceFile], version: UInt64, fileFormat: UInt32, to path: String) throws(FeedError) -> DirectoryCompiler.Written {
        let compiler = makeCompiler(version: version, temporaryFolder: FileOperations.folder(of: path), fileFormat: fileFormat)
        try add(sources, to: compiler)
        let outcome: Result<DirectoryCompiler.Written, CompileFailure>
        do { outcome = try compiler.write(to: path) } catch { throw FeedError("cannot write \(path): \(error)") }
        return try result(outcome)
    }

    private func makeCompiler(version: UInt64, temporaryFolder: String, fileFormat: UInt32 = DirectoryFormat.version) -> DirectoryCompiler {
        var options = DirectoryCompiler.Options()
        options.fileFormat = fileFormat
        options.plan = plan
        options.onDuplicate = .first
        options.directoryVersion = version
        options.maxDiagnostics = Self.quotedDiagnostics
        options.temporaryFolder = temporaryFolder
        return DirectoryCompiler(options: options)
    }

    private func add(_ sources: [SourceFile], to compiler: DirectoryCompiler) throws(FeedError) {
        for source in sources {
            let fd: FileDescriptor
            do { fd = try FileDescriptor.open(source.path, O_RDONLY | O_CLOEXEC) } catch {
                throw FeedError("\(source.path): cannot open: \(error)")
            }
            defer { fd.close() }
            do { try compiler.add(descriptor: fd, name: source.name, format: source.format, source: source.options) } catch {
                throw FeedError("\(error)")
            }
        }
    }

    private func result(_ outcome: Result<DirectoryCompiler.Written, CompileFailure>) throws(FeedError) -> DirectoryCompiler.Written {
        switch outcome {
        case .success(let written):
            return written
        case .failure(let failure):
            var text = "the list has \(failure.total) invalid line\(failure.total == 1 ? "" : "s"): "
            text += failure.diagnostics.map(\.description).joined(separator: "; ")
            if failure.total > failure.diagnostics.count { text += "; ... and \(failure.total - failure.diagnostics.count) more" }
            throw FeedError(text)
        }
    }
}
