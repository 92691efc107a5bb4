import Directory

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
    func count(_ sources: [SourceFile]) throws(FeedError) -> (entries: Int, warnings: [Diagnostic], warningCount: Int) {
        let compiler = makeCompiler(version: 0)
        try add(sources, to: compiler)
        _ = try finish(compiler)
        return (compiler.entriesKept, compiler.warnings, compiler.warningCount)
    }

    /// Compiles the lists of several feeds, in priority order, into one directory.
    func build(_ sources: [SourceFile], version: UInt64) throws(FeedError) -> DirectoryContent {
        let compiler = makeCompiler(version: version)
        try add(sources, to: compiler)
        return try finish(compiler)
    }

    private func makeCompiler(version: UInt64) -> DirectoryCompiler {
        var options = DirectoryCompiler.Options()
        options.plan = plan
        options.onDuplicate = .first
        options.directoryVersion = version
        options.maxDiagnostics = Self.quotedDiagnostics
        return DirectoryCompiler(options: options)
    }

    private func add(_ sources: [SourceFile], to compiler: DirectoryCompiler) throws(FeedError) {
        for source in sources {
            let file: MappedFile
            do { file = try MappedFile(path: source.path) } catch { throw FeedError("\(error)") }
            compiler.add(bytes: file.bytes, name: source.name, format: source.format, source: source.options)
        }
    }

    private func finish(_ compiler: DirectoryCompiler) throws(FeedError) -> DirectoryContent {
        switch compiler.finish() {
        case .success(let content):
            return content
        case .failure(let failure):
            var text = "the list has \(failure.total) invalid line\(failure.total == 1 ? "" : "s"): "
            text += failure.diagnostics.map(\.description).joined(separator: "; ")
            if failure.total > failure.diagnostics.count { text += "; ... and \(failure.total - failure.diagnostics.count) more" }
            throw FeedError(text)
        }
    }
}
