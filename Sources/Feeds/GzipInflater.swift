import CZlib
import Glibc

/// gzip (RFC 1952) through zlib, file to file, counting the output as it is produced: a
/// small download that inflates past `max-size` (a compression bomb) is stopped there,
/// whatever its trailer claims. Concatenated members (`cat a.gz b.gz`) are one stream,
/// as gzip(1) reads them.
enum GzipInflater {
    private static let chunk = 1 << 16

    /// Inflates `source` into `destination`; returns the bytes written.
    static func inflate(_ source: String, to destination: String, maxSize: Int64) throws(FeedError) -> Int64 {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw FeedError("cannot open \(source): \(FileOperations.errorText(errno))") }
        defer { close(input) }
        let output = open(destination, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o640)
        guard output >= 0 else { throw FeedError("cannot create \(destination): \(FileOperations.errorText(errno))") }
        defer { close(output) }

        let inBuffer = UnsafeMutablePointer<UInt8>.allocate(capacity: chunk)
        let outBuffer = UnsafeMutablePointer<UInt8>.allocate(capacity: chunk)
        defer {
            inBuffer.deallocate()
            outBuffer.deallocate()
        }
        var stream = z_stream()
        // 16 + 15: a gzip wrapper (not zlib, not raw deflate), the largest window.
        guard czlib_inflate_init(&stream, 16 + MAX_WBITS) == Z_OK else { throw FeedError("cannot initialize zlib") }
        defer { inflateEnd(&stream) }

        var written: Int64 = 0
        var endOfInput = false
        var finishedMember = false
        var sawData = false
        while true {
            if stream.avail_in == 0 && !endOfInput {
                let n = read(input, inBuffer, chunk)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw FeedError("cannot read \(source): \(FileOperations.errorText(errno))")
                }
                if n == 0 { endOfInput = true } else {
                    stream.next_in = inBuffer
                    stream.avail_in = UInt32(n)
                    sawData = true
                }
            }
            if finishedMember {
                // Another member follows only if bytes do; nothing left means a clean end.
                if stream.avail_in == 0 && endOfInput { break }
                if stream.avail_in == 0 { continue }
                guard inflateReset(&stream) == Z_OK else { throw FeedError("cannot reset zlib") }
                finishedMember = false
            }
            if stream.avail_in == 0 && endOfInput {
                throw FeedError(sawData ? "the gzip data is truncated (it ends inside a compressed stream)" : "the gzip data is empty")
            }
            stream.next_out = outBuffer
            stream.avail_out = UInt32(chunk)
            let status = CZlib.inflate(&stream, Z_NO_FLUSH)
            let produced = chunk - Int(stream.avail_out)
            if produced > 0 {
                guard Int64(produced) <= maxSize - written else {
                    throw FeedError("the gzip data inflates to more than max-size=\(maxSize) bytes (a compression bomb?); refused")
                }
                try writeAll(output, outBuffer, produced, destination)
                written += Int64(produced)
            }
            switch status {
            case Z_OK:
                continue
            case Z_STREAM_END:
                finishedMember = true
            case Z_BUF_ERROR:
                // No progress possible with what is buffered: more input is needed.
                if endOfInput && stream.avail_in == 0 {
                    throw FeedError("the gzip data is truncated (it ends inside a compressed stream)")
                }
            case Z_DATA_ERROR:
                let detail = stream.msg.map { String(cString: $0) } ?? "invalid data"
                throw FeedError("the gzip data is corrupt: \(detail)")
            case Z_MEM_ERROR:
                throw FeedError("zlib ran out of memory")
            default:
                throw FeedError("zlib failed with status \(status)")
            }
        }
        guard fsync(output) == 0 else { throw FeedError("cannot fsync \(destination): \(FileOperations.errorText(errno))") }
        return written
    }

    private static func writeAll(_ fd: Int32, _ buffer: UnsafeMutablePointer<UInt8>, _ count: Int, _ path: String) throws(FeedError) {
        var offset = 0
        while offset < count {
            let n = write(fd, buffer + offset, count - offset)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw FeedError("cannot write \(path): \(FileOperations.errorText(errno))") }
            offset += n
        }
    }
}
