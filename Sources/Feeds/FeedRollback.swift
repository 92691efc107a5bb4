import FeedRecords

extension FeedUpdater {
    /// `lookupd update --rollback NAME`: exchanges the directory file NAME feeds with the
    /// one its last install replaced, and the downloads and state of every feed merged into
    /// it likewise, so a second rollback undoes the first. What the publisher last served is
    /// left as it is: the list rolled back from is not fetched and installed again until the
    /// publisher changes it (or `--force`).
    public func rollback(feed name: String, reload shouldReload: Bool) throws(FeedError) -> FeedUpdateResult {
        _ = try select([name])
        let feed = config.feeds.first { $0.name == name }!
        let target = config.target(of: feed)
        let session = try Session(folder: store.folder)
        defer { session.finish() }
        let header = try DirectoryInstaller.rollback(target)
        let now = unixTime()
        var names: [String] = []
        for member in config.feeds where config.target(of: member) == target {
            names.append(member.name)
            var record = store.read(member.name) ?? FeedRecord(feed: member.name)
            if FileOperations.isRegularFile(previousDataPath(member.name)) {
                try FileOperations.swap(dataPath(member.name), previousDataPath(member.name))
            }
            record.swapWithPrevious()
            record.rolledBack = now
            do { try store.write(record) } catch { throw FeedError("\(error)") }
        }
        log(.notice, "\(target): rolled back to the previous list (directory version \(header.directoryVersion), \(header.entryCount) numbers, feeds \(names.joined(separator: ", "))); lookupd update --rollback \(name) again undoes it")
        var result = FeedUpdateResult()
        result.installed = [target]
        if shouldReload { result.reload = reload() }
        return result
    }
}
