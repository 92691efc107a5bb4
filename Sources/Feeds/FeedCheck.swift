import Configuration
import Directory
import FeedRecords

/// A feed's new list, downloaded and proven sound, waiting for its directory to be rebuilt.
struct StagedFeed {
    var download: String
    var sources: [SourceFile]
    var entries: Int
    var version: String
    var sha256: String
    var size: Int64
    var validators: Validators
    var manifestValidators: Validators?
}

enum CheckOutcome {
    case unchanged(reason: String)
    case changed(StagedFeed)
    case failed(FeedError)
}

/// Fetches one feed and decides whether it brings a new list worth installing: the
/// manifest (if any) first, then the list, each with conditional headers; then the
/// checksums, sizes, every line and the entry count, all before anything is installed.
///
/// Validators the publisher sends with an unchanged answer are written to `record`
/// at once; those of a new list only travel in the staged feed, so that a failed
/// install downloads the list again next time instead of being told "not modified".
struct FeedCheck {
    let feed: FeedConfig
    let work: String
    let hasData: Bool
    let options: FeedUpdateOptions
    let compiler: FeedCompiler
    let log: FeedUpdater.Log

    func run(_ record: inout FeedRecord) -> CheckOutcome {
        do {
            return try check(&record)
        } catch {
            return .failed(error)
        }
    }

    private func check(_ record: inout FeedRecord) throws(FeedError) -> CheckOutcome {
        // Without the last download on disk there is nothing to compare with or rebuild from.
        // Validators answer for the URL they came from only: sent to a new URL, a
        // server that answers 304 to any If-Modified-Since would keep the new list out.
        let listMoved = record.validatorsURL != feed.url && !(record.etag.isEmpty && record.lastModified.isEmpty)
        let manifestMoved = feed.manifest != nil && record.manifestValidatorsURL != feed.manifest
            && !(record.manifestETag.isEmpty && record.manifestLastModified.isEmpty)
        let conditional = hasData && !options.force && !listMoved && !manifestMoved
        if listMoved || manifestMoved {
            log(.info, "\(feed.name): \(listMoved ? "URL" : "manifest URL") changed since the last download; fetching it anew")
        }
        var manifest: FeedManifest? = nil
        var manifestValidators: Validators? = nil
        if let url = feed.manifest {
            let path = work + "/manifest.json"
            let sent = conditional ? Validators(etag: record.manifestETag, lastModified: record.manifestLastModified) : nil
            let outcome: DownloadOutcome
            do {
                outcome = try HTTPDownload.get(url, to: path, validators: sent, timeout: feed.timeout,
                                               maxSize: Int64(FeedManifest.maxBytes), userAgent: options.userAgent)
            } catch {
                throw FeedError("manifest \(url): \(error)")
            }
            switch outcome {
            case .notModified:
                return .unchanged(reason: "manifest not modified (HTTP 304)")
            case .downloaded(let download):
                let parsed: FeedManifest
                do { parsed = try FeedManifest.parse(try FileOperations.read(path, limit: FeedManifest.maxBytes)) } catch {
                    throw FeedError("manifest \(url): \(error)")
                }
                manifest = parsed
                manifestValidators = download.validators
                if conditional, let same = sameAsFetched(parsed, record) {
                    record.manifestETag = download.validators.etag
                    record.manifestLastModified = download.validators.lastModified
                    record.manifestValidatorsURL = url
                    return .unchanged(reason: same)
                }
            }
        }

        let download = work + "/download"
        // A manifest announcing something new means the list is new: no conditional request
        // (a mirror still serving the old file would answer 304 and hide the mismatch).
        let sent = conditional && manifest == nil ? Validators(etag: record.etag, lastModified: record.lastModified) : nil
        let fetched: Download
        switch try HTTPDownload.get(feed.url, to: download, validators: sent, timeout: feed.timeout,
                                    maxSize: feed.maxSize, userAgent: options.userAgent) {
        case .notModified:
            return .unchanged(reason: "not modified (HTTP 304)")
        case .downloaded(let d):
            fetched = d
        }
        if let expected = feed.sha256, expected != fetched.sha256 {
            throw FeedError("sha256 mismatch: the download's is \(fetched.sha256), sha256= expects \(expected)")
        }
        if let expected = manifest?.sha256, expected != fetched.sha256 {
            throw FeedError("sha256 mismatch: the download's is \(fetched.sha256), the manifest says \(expected)")
        }
        if let expected = manifest?.size, expected != fetched.size {
            throw FeedError("size mismatch: downloaded \(fetched.size) bytes, the manifest says \(expected)")
        }
        // A publisher that ignores conditional requests (or bumps a manifest's version over the
        // same file): the same bytes are no news. Only after the checks above, so a manifest
        // announcing other bytes is a mismatch, not "unchanged".
        if conditional, !record.fetchedSHA256.isEmpty, fetched.sha256 == record.fetchedSHA256 {
            record.etag = fetched.validators.etag
            record.lastModified = fetched.validators.lastModified
            record.validatorsURL = feed.url
            if let m = manifestValidators {
                record.manifestETag = m.etag
                record.manifestLastModified = m.lastModified
                record.manifestValidatorsURL = feed.manifest ?? ""
            }
            return .unchanged(reason: "same content as the last download (sha256 \(fetched.sha256.prefix(12))...)")
        }

        let unpacked = try FeedUnpacker.unpack(download, feed: feed, into: work)
        if !unpacked.skipped.isEmpty {
            log(.info, "\(feed.name): archive members not read: \(unpacked.skipped.prefix(10).joined(separator: ", "))")
        }
        let counted = try compiler.count(unpacked.sources, work: work)
        let entries = counted.entries
        for warning in counted.warnings.prefix(FeedCompiler.quotedDiagnostics) { log(.warning, "\(feed.name): \(warning)") }
        if counted.warningCount > FeedCompiler.quotedDiagnostics {
            log(.warning, "\(feed.name): ... and \(counted.warningCount - FeedCompiler.quotedDiagnostics) more lines left out or changed")
        }
        if let expected = manifest?.count, expected != entries {
            throw FeedError("entry count mismatch: the list has \(entries) entries, the manifest says \(expected)")
        }
        if record.isInstalled, !options.allowShrink, feed.maxShrink < 100,
           entries * 100 < record.entries * (100 - feed.maxShrink) {
            let percent = (record.entries - entries) * 100 / max(record.entries, 1)
            throw FeedError("the list shrank from \(record.entries) to \(entries) entries (-\(percent)%), more than max-shrink=\(feed.maxShrink)%; refused (lookupd update --allow-shrink \(feed.name) accepts it)")
        }
        let version = manifest?.version ?? FeedClock.stamp(unixTime())
        return .changed(StagedFeed(download: download, sources: unpacked.sources, entries: entries, version: version,
                                   sha256: fetched.sha256, size: fetched.size, validators: fetched.validators,
                                   manifestValidators: manifestValidators))
    }

    /// Why a manifest announces nothing new, nil when it may.
    private func sameAsFetched(_ manifest: FeedManifest, _ record: FeedRecord) -> String? {
        if let sha = manifest.sha256 {
            return sha == record.fetchedSHA256 ? "manifest: same sha256 as the last download" : nil
        }
        if let version = manifest.version, version == record.fetchedVersion {
            return "manifest: still version \(version)"
        }
        return nil
    }
}
