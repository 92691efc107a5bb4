import Glibc

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
        try Self.writeAtomically(record.encoded(), to: path(of: record.feed), folder: folder)
    }

    /// State files are a few hundred bytes; anything past 64 KiB is not one.
    static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 65536)
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            count += n
        }
        return String(decoding: bytes[0..<count], as: UTF8.self)
    }

    static func writeAtomically(_ text: String, to path: String, folder: String) throws(FeedRecordError) {
        let temporary = "\(path).tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o640)
        guard fd >= 0 else { throw FeedRecordError(path: temporary, operation: "create", errno: errno) }
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let code = errno
                close(fd)
                unlink(temporary)
                throw FeedRecordError(path: temporary, operation: "write", errno: code)
            }
            offset += n
        }
        bytes.removeAll()
        guard fsync(fd) == 0 else {
            let code = errno
            close(fd)
            unlink(temporary)
            throw FeedRecordError(path: temporary, operation: "fsync", errno: code)
        }
        close(fd)
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw FeedRecordError(path: path, operation: "rename \(temporary) to", errno: code)
        }
        let dir = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
    }
}

public struct FeedRecordError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var operation: String
    public var errno: Int32

    public var description: String { "\(path): cannot \(operation): \(String(cString: strerror(errno)))" }
}
