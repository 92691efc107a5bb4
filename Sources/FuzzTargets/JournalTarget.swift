import CFuzzer
import Directory
import Glibc

/// journal: the first byte chooses the mode, the second where the file is
/// cut, the rest is a journal file.
///
///   bit 0  1: before reading, recompute the header checksum and every
///          record's checksum (seeded with the journal id) so mutations
///          get past them and reach the sequence, key and label checks;
///          0: read as is
///
/// The file goes into an unnamed memory file and is followed as the daemon
/// follows a journal: one `poll()` with only the bytes before the cut
/// written (an append in progress), then the rest appended and polled
/// again (the incremental path). A follower must end where a single read
/// of the whole file ends: the same records, sequence and tail.
enum JournalTarget {
    static func run(_ input: UnsafeRawBufferPointer) {
        guard input.count >= 2 else { return }
        let mode = input[0]
        var bytes = Array(input.dropFirst(2))
        if mode & 1 == 1 { fixUp(&bytes) }
        let cut = bytes.isEmpty ? 0 : Int(input[1]) * bytes.count / 255

        let fd = lookupd_fuzz_memfd()
        guard fd >= 0 else { FuzzCheck.fail("memfd_create: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let path = "/proc/self/fd/\(fd)"
        append(fd, bytes[0..<cut])
        let follower = JournalFollower(path: path)
        _ = try? follower.poll()
        append(fd, bytes[cut...])
        let incremental = Result { () throws(JournalError) in try follower.poll() }
        let whole = Result { () throws(JournalError) in try JournalFollower.read(path: path) }

        guard case .success = incremental, case .success(let read) = whole else { return }
        let state = read?.state ?? JournalState()
        var problems: [String] = []
        if follower.state.journalID != state.journalID { problems.append("journal id") }
        if follower.state.lastSequence != state.lastSequence {
            problems.append("last sequence \(follower.state.lastSequence) against \(state.lastSequence)")
        }
        if follower.state.latest != state.latest || follower.state.beneath != state.beneath { problems.append("records differ") }
        if follower.tail?.offset != read?.tail?.offset || follower.tail?.isTorn != read?.tail?.isTorn { problems.append("tails differ") }
        for record in state.latest.values where JournalRecord.pattern(key: record.key) == nil {
            problems.append("a record with key \(record.key) that names no number")
        }
        if let first = problems.first { FuzzCheck.fail("journal read in two steps differs from one read: \(first)", input) }
    }

    static func append(_ fd: Int32, _ bytes: ArraySlice<UInt8>) {
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            guard n > 0 else { FuzzCheck.fail("write to memfd") }
            written += n
        }
    }

    /// The layout of docs/FORMATS.md: a 40-byte header (version at 8,
    /// checksum at 32 over bytes 0..<32, journal id at 16), then records of
    /// 48 bytes plus the label (version 3; 40 in version 2, without the
    /// expiry; 32 in version 1, without the time either; size at 0, label
    /// length at 6, checksum after the label).
    static func fixUp(_ bytes: inout [UInt8]) {
        guard bytes.count >= 40 else { return }
        func load64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << UInt64(8 * $1) } }
        func store64(_ value: UInt64, _ at: Int) { for i in 0..<8 { bytes[at + i] = UInt8(truncatingIfNeeded: value >> UInt64(8 * i)) } }
        store64(XXH64.hash(Array(bytes[0..<32])), 32)
        let journalID = load64(16)
        let fixed = bytes[8] == 1 ? 32 : bytes[8] == 2 ? 40 : 48
        var offset = 40
        while offset + fixed <= bytes.count {
            let labelLength = Int(bytes[offset + 6]) | Int(bytes[offset + 7]) << 8
            let size = fixed + labelLength
            guard offset + size <= bytes.count else { break }
            // A consistent size field, or the scan stops here anyway.
            for (i, b) in [UInt8(size & 0xff), UInt8(size >> 8 & 0xff), 0, 0].enumerated() { bytes[offset + i] = b }
            let covered = fixed - 8 + labelLength
            store64(XXH64.hash(Array(bytes[offset..<(offset + covered)]), seed: journalID), offset + covered)
            offset += size
        }
    }
}
