import CZip
import Directory
import Glibc
import SystemCalls

/// Reads the lists out of a zip archive with libzip.
///
/// The archive is distrusted: libzip checks its structure (ZIP_CHECKCONS) and each
/// member's CRC; a member whose path is absolute or climbs out with `..` makes the whole
/// archive refused (its publisher is broken or hostile); the inflated bytes of all members
/// together are counted as they come out and stopped at `max-size`, whatever sizes the
/// headers claim. Members are written under names of our own, never their paths.
enum ZipExtractor {
    struct Member {
        var name: String
        var path: String
        var format: SourceFormat
    }

    struct Extracted {
        var members: [Member]
        /// Members not read, for the log (README.txt, a manifest in the archive...).
        var skipped: [String]
    }

    static func extract(_ archive: String, into folder: String, members wanted: [String], format: SourceFormat?,
                        maxSize: Int64) throws(FeedError) -> Extracted {
        var code: Int32 = 0
        guard let zip = zip_open(archive, ZIP_RDONLY | ZIP_CHECKCONS, &code) else {
            throw FeedError("not a readable zip archive: \(zipErrorText(code))")
        }
        defer { zip_discard(zip) }
        let count = zip_get_num_entries(zip, 0)
        guard count >= 0 else { throw FeedError("not a readable zip archive: \(archiveErrorText(zip))") }

        var files: [(index: UInt64, name: String, size: UInt64?)] = []
        for index in 0..<UInt64(count) {
            guard let raw = zip_get_name(zip, index, zip_flags_t(ZIP_FL_ENC_GUESS)) else {
                throw FeedError("the zip archive is damaged: member \(index) has no readable name")
            }
            let name = String(cString: raw)
            if let problem = unsafePathProblem(name) {
                throw FeedError("the zip archive holds a member with an unsafe path '\(printable(name))' (\(problem)); refused")
            }
            if name.hasSuffix("/") { continue }
            var info = zip_stat_t()
            zip_stat_init(&info)
            let known = zip_stat_index(zip, index, 0, &info) == 0 && info.valid & UInt64(ZIP_STAT_SIZE) != 0
            files.append((index, name, known ? info.size : nil))
        }

        var chosen: [(index: UInt64, name: String, size: UInt64?, format: SourceFormat)] = []
        var skipped: [String] = []
        if wanted.isEmpty {
            for file in files {
                if let f = format ?? SourceFormat.guess(path: file.name) {
                    chosen.append((file.index, file.name, file.size, f))
                } else {
                    skipped.append(file.name)
                }
            }
            guard !chosen.isEmpty else {
                let names = files.map(\.name).prefix(10).map(printable).joined(separator: ", ")
                throw FeedError("the zip archive holds no list named .csv, .json, .txt or .vcf (members: \(names.isEmpty ? "none" : names)); name them with members= and format=")
            }
        } else {
            for name in wanted {
                guard let file = files.first(where: { $0.name == name }) else {
                    let names = files.map(\.name).prefix(10).map(printable).joined(separator: ", ")
                    throw FeedError("the zip archive has no member '\(name)' (members: \(names.isEmpty ? "none" : names))")
                }
                guard let f = format ?? SourceFormat.guess(path: file.name) else {
                    throw FeedError("cannot tell the format of member '\(printable(name))'; add format=csv|json|text|vcard")
                }
                chosen.append((file.index, file.name, file.size, f))
            }
            skipped = files.map(\.name).filter { !wanted.contains($0) }
        }

        // The headers' sizes refuse an obvious bomb before any work; the count while
        // inflating is what actually holds.
        let declared = chosen.reduce(UInt64(0)) { $0 &+ ($1.size ?? 0) }
        guard declared <= UInt64(maxSize) else {
            throw FeedError("the zip archive's members would unpack to \(declared) bytes, more than max-size=\(maxSize); refused")
        }

        var total: Int64 = 0
        var result: [Member] = []
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 16, alignment: 8)
        defer { buffer.deallocate() }
        for (n, member) in chosen.enumerated() {
            let path = "\(folder)/member-\(n)"
            try copyMember(zip, member.index, name: member.name, to: path, buffer: buffer, total: &total, maxSize: maxSize)
            result.append(Member(name: member.name, path: path, format: member.format))
        }
        return Extracted(members: result, skipped: skipped)
    }

    private static func copyMember(_ zip: OpaquePointer, _ index: UInt64, name: String, to path: String,
                                   buffer: UnsafeMutableRawPointer, total: inout Int64, maxSize: Int64) throws(FeedError) {
        guard let file = zip_fopen_index(zip, index, 0) else {
            throw FeedError("cannot read member '\(printable(name))' of the zip archive: \(archiveErrorText(zip))")
        }
        defer { zip_fclose(file) }
        let fd = try FileOperations.create(path)
        defer { fd.close() }
        while true {
            let n = zip_fread(file, buffer, 1 << 16)
            if n < 0 {
                let detail = zip_file_get_error(file).map { String(cString: zip_error_strerror($0)) } ?? "read error"
                throw FeedError("member '\(printable(name))' of the zip archive is damaged: \(detail)")
            }
            if n == 0 { break }
            guard n <= maxSize - total else {
                throw FeedError("the zip archive unpacks to more than max-size=\(maxSize) bytes (a compression bomb?); refused")
            }
            try FileOperations.writeAll(fd, UnsafeRawBufferPointer(start: buffer, count: Int(n)), path: path)
            total += n
        }
    }

    /// Why a member name could escape the folder it is unpacked into, nil when it cannot.
    /// Checked on every member, read or not: such an archive is not trusted at all.
    static func unsafePathProblem(_ name: String) -> String? {
        if name.hasPrefix("/") || name.hasPrefix("\\") { return "absolute path" }
        let bytes = Array(name.utf8)
        if bytes.count >= 2, bytes[1] == UInt8(ascii: ":"), (bytes[0] | 0x20) >= 0x61, (bytes[0] | 0x20) <= 0x7A { return "drive letter" }
        let parts = name.split(omittingEmptySubsequences: false) { $0 == "/" || $0 == "\\" }
        if parts.contains("..") { return "'..' component" }
        if name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) { return "control character" }
        return nil
    }

    private static func zipErrorText(_ code: Int32) -> String {
        var error = zip_error_t()
        zip_error_init_with_code(&error, code)
        defer { zip_error_fini(&error) }
        return String(cString: zip_error_strerror(&error))
    }

    private static func archiveErrorText(_ zip: OpaquePointer) -> String {
        String(cString: zip_error_strerror(zip_get_error(zip)))
    }

    static func printable(_ text: String) -> String {
        String(text.unicodeScalars.prefix(80).map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) })
    }
}
