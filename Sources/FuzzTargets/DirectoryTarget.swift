import CFuzzer
import Directory
import Glibc
import TextRules

/// directory: the first byte chooses the mode, the rest is a directory file.
///
///   bit 0  1: before loading, set the header's file size and both checksums
///          to match the bytes, so mutations get past the checksums and
///          reach the structural checks and `verify()`; 0: load as is
///
/// The file goes into an unnamed memory file (memfd) and is opened as the
/// daemon opens its private copy. Every opened file must answer lookups
/// and iteration without touching memory outside the mapping (the format
/// promises memory-safe lookups before verification); a verified one must
/// find each of its entries and hold only acceptable labels.
enum DirectoryTarget {
    static let probes: [UInt64] = [
        1, 9, 10, 86, 8613800138000, 8613700001111, 8618600000000, 8617012345678, 861059000000,
        999_999_999_999_999, 100_000_000_000_000, 4930123456, 12025550123,
    ]

    static func run(_ input: UnsafeRawBufferPointer) {
        guard let mode = input.first else { return }
        var bytes = Array(input.dropFirst())
        if mode & 1 == 1, bytes.count >= DirectoryFormat.headerSize {
            fixUp(&bytes)
        }
        let fd = lookupd_fuzz_memfd()
        guard fd >= 0 else { FuzzCheck.fail("memfd_create: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            guard n > 0 else { FuzzCheck.fail("write to memfd") }
            written += n
        }
        let file: DirectoryFile
        do { file = try DirectoryFile(descriptor: fd, path: "fuzz.lkd") } catch { return }
        probe(file)
        do { try file.verify() } catch { return }
        checkVerified(file, input)
    }

    /// Header fields 16 (file size), 120 (content checksum or checksum
    /// root), 248 (header checksum), and a version-2 file's block checksums.
    static func fixUp(_ bytes: inout [UInt8]) {
        for i in 0..<8 { bytes[16 + i] = UInt8(truncatingIfNeeded: UInt64(bytes.count) >> UInt64(8 * i)) }
        DirectoryWriter.resealForTesting(&bytes)
    }

    /// What serving does with a file, verified or not.
    static func probe(_ file: DirectoryFile) {
        var sink = 0
        for value in probes {
            guard let number = PhoneNumber(value: value) else { continue }
            if let entry = try? file.lookup(number), let label = entry.label {
                sink &+= file.labelBytes(label).count
            }
        }
        var seen = 0
        // A damaged block ends the walk with an error: what export reports.
        try? file.forEachEntry { entry in
            seen += 1
            // What `lookupd export` writes, verified or not.
            sink &+= entry.match.description.utf8.count
            if let label = entry.label { sink &+= file.labelBytes(label).count }
            // An unverified file may hold keys that are no E.164 number; the
            // daemon only ever looks up numbers the normalizer produced.
            if case .exact(let number) = entry.match, seen <= 64, let valid = PhoneNumber(value: number.value) {
                _ = try? file.lookup(valid)
            }
        }
        for id in 0..<UInt32(min(file.labelTableCount, 64)) { sink &+= file.label(id).utf8.count }
        _ = sink
    }

    static func checkVerified(_ file: DirectoryFile, _ input: UnsafeRawBufferPointer) {
        var problems: [String] = []
        var exact = 0, rules = 0
        do {
        try file.forEachEntry { entry in
            guard problems.isEmpty else { return }
            if !entry.blocked && entry.label == nil { problems.append("an entry that neither blocks nor identifies") }
            if let label = entry.label {
                if let problem = LabelRules.problem(file.labelBytes(label)) { problems.append("verified label: \(problem)") }
            }
            switch entry.match {
            case .exact(let number):
                exact += 1
                if (try? file.lookup(number)) != entry { problems.append("lookup(\(number)) does not find its own entry") }
            case .prefix:
                rules += 1
            }
        }
        } catch {
            problems.append("a verified file fails while iterated: \(error)")
        }
        if exact != file.count { problems.append("\(exact) exact entries iterated, header says \(file.count)") }
        if rules != file.prefixRuleCount { problems.append("\(rules) prefix rules iterated, header says \(file.prefixRuleCount)") }
        if let first = problems.first { FuzzCheck.fail("verified directory: \(first)", input) }
    }
}
