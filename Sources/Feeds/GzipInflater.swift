import CZlib
import Glibc
import SystemCalls

/// gzip (RFC 1952) through zlib, file to file, counting the output as it is produced: a
/// small download that inflates past `max-size` (a compression bomb) is stopped there,
/// whatever its trailer claims. Concatenated members (`cat a.gz b.gz`) are one stream,
/// as gzip(1) reads them.
enum GzipInflater {
    private static let chunk = 1 << 16

    /// Inflates `source` into `destination`; returns the bytes written.
    static func inflate(_ source: String, to destination: String, maxSize: Int64) throws(FeedError) -> Int64 {
        let input: FileDescriptor
        do { input = try openRegularFile(source, maxBytes: Int.max).0 } catch { throw FeedError("cannot open \(source): \(error)") }
        defer { input.close() }
        let output = try FileOperations.create(destination)
        defer { output.close() }

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
                let n: Int
                do { n = try input.read(into: UnsafeMutableRawBufferPointer(start: inBuffer, count: chunk)) } catch {
                    throw FeedError("cannot read \(source): \(error)")
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
                try FileOperations.writeAll(output, UnsafeRawBufferPointer(start: outBuffer, count: produced), path: destination)
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
        try FileOperations.sync(output, path: destination)
        return written
    }
}
