import Glibc
import SystemCalls

/// The folder of feed state files, `STATE-DIRECTORY/feeds`.
///
/// Writes are atomic (temporary file, fsync, rename, fsync of the folder): `lookupd stats`
/// may read a record at any moment, and a crash must leave the old record or the new one.
public struct FeedRecordStore: Sendable {
    public let folder: String

    public init(folder: String) { self.folder = folder }

    /// The feeds folder under a configured state directory.
    public init(stateDirectory: String) {
        folder = stateDirectory.hasSuffix("/") ? stateDirectory + "feeds" : stateDirectory + "/feeds"
    }

    public func path(of feed: String) -> String { "\(folder)/\(feed).state" }

    /// The record of `feed`, nil when it was never written or cannot be read.
    public func read(_ feed: String) -> FeedRecord? {
        guard let text = Self.readSmallFile(path(of: feed)) else { return nil }
        return FeedRecord.decode(text)
    }

    public func write(_ record: FeedRecord) throws(FeedRecordError) {
        try Self.writeAtomically(record.encoded(), to: path(of: record.feed))
    }

    /// State files are a few hundred bytes; anything past 64 KiB is not one (nor is a FIFO, a
    /// device or a link put in the state directory).
    static func readSmallFile(_ path: String) -> String? {
        guard let bytes = try? readRegularFile(path, maxBytes: 65536, followSymlinks: false) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func writeAtomically(_ text: String, to path: String) throws(FeedRecordError) {
        do { try writeFileAtomically(path, contents: Array(text.utf8), permissions: 0o640) } catch {
            throw FeedRecordError(path: error.path, operation: error.operation, errno: error.code)
        }
    }
}

public struct FeedRecordError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var operation: String
    public var errno: Int32

    public var description: String { "\(path): cannot \(operation): \(String(cString: strerror(errno)))" }
}
