import CIntrinsics
import CMappingGuard
import Glibc
import Synchronization
import SystemCalls
import TextRules

/// What a directory says about one number.
public struct DirectoryEntry: Equatable, Sendable {
    public var blocked: Bool
    /// An allow entry: lower-priority directories do not block the number.
    public var allowed: Bool = false
    /// Label number inside the directory, nil when the entry only blocks.
    public var label: UInt32?
    /// The exact entry, or the prefix rule, that matched.
    public var match: NumberPattern
}

/// An open directory file, memory-mapped read-only.
///
/// Threading: immutable after `open` apart from what verification
/// remembers (atomically); any number of threads may look numbers up
/// concurrently. The mapping lives as long as the object, so requests
/// still holding a reference after a reload finish on the old file.
///
/// Nothing is copied to the heap: keys, values and labels are read straight
/// from the mapping, so private memory does not grow with the directory
/// (the verification bitmap is one bit per 4 KiB block).
///
/// Nothing is answered from unverified bytes. A version-2 file is verified
/// by block as it is read (`BlockVerifier`): every lookup checks the blocks
/// it touches, the first time, and throws `DirectoryError.damagedBlock`
/// instead of answering from a block that fails. A version-1 file has only
/// a whole-content checksum, so the first lookup verifies it completely.
/// `verify()` checks everything (checksums and structure) up front, which
/// the daemon does before serving; after it lookups check nothing more.
public final class DirectoryFile: @unchecked Sendable {
    public let path: String
    public let header: DirectoryHeader
    private let base: UnsafeRawPointer
    private let size: Int
    private let keys: UnsafePointer<UInt64>
    private let values: UnsafePointer<UInt32>
    private let prefixes: UnsafeRawPointer
    private let labelIndex: UnsafePointer<UInt32>
    private let labelData: UnsafePointer<UInt8>
    private let entryCount: Int
    /// Version 4: nodes of eight keys (`KeyNodes`); 0 for a file in binary order.
    private let nodeCount: Int
    private let prefixCount: Int
    private let labelCount: Int
    private let labelDataSize: Int
    private let layout: DirectoryLayout
    /// Version 2: the per-block verification; nil for version 1.
    public let verifier: BlockVerifier?
    /// The verifier's bitmap and block shift, held here so a lookup tests a block's bit with
    /// plain loads: calling into the verifier for every key cost a retain and a release of
    /// it (an atomic add on a reference count every worker shares, about 23 pairs and 1,800
    /// instructions per INVITE at 10^6 entries). nil for version 1.
    private let verifiedBits: UnsafeMutablePointer<Atomic<UInt64>>?
    private let blockShift: Int
    /// Every byte is known good (all blocks checked, or `verify()` passed):
    /// lookups skip their checks.
    private let trusted = Atomic<Bool>(false)
    /// Version 1: the outcome of the one complete verification, once done.
    private let wholeFileCheck = Mutex<DirectoryError??>(nil)
    /// Guarded (the file itself is mapped, not a private copy): the slot of
    /// the mapping in the SIGBUS guard (CMappingGuard), else -1.
    private let guardSlot: Int32
    /// Guarded: a descriptor of the file kept open so that `changeOnDisk`
    /// can fstat the very inode that is mapped, and its size and
    /// modification time when it was mapped.
    private let watchFD: Int32
    private let mappedModified: timespec

    /// Maps `path` and checks its header (and, for version 2, the root of
    /// its checksum tree). It does not read the content (O(1)): lookups
    /// verify what they touch, `verify()` checks everything.
    public convenience init(path: String) throws(DirectoryError) {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(path, O_RDONLY) } catch { throw .system(path: path, operation: "open", errno: error.rawValue) }
        defer { fd.close() }
        try self.init(descriptor: fd.rawValue, path: path)
    }

    /// Maps an already open file. `path` is only used in messages. The
    /// descriptor may be closed afterwards.
    ///
    /// `guarded`: the file is one others can truncate or rewrite (the
    /// daemon serving the installed file, not a private copy): its reads
    /// are guarded against SIGBUS (CMappingGuard.h says how), every lookup
    /// asks afterwards whether the mapping was damaged meanwhile and
    /// throws `changedWhileServed` instead of answering, and
    /// `changeOnDisk` tells a caller polling it that the file changed.
    public init(descriptor fd: Int32, path: String, guarded: Bool = false) throws(DirectoryError) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .system(path: path, operation: "stat", errno: errno) }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            throw .corrupt(path: path, reason: "not a regular file")
        }
        let size = Int(st.st_size)
        if size < DirectoryFormat.headerSize {
            // Read what there is to tell "not ours" from "truncated".
            var head = [UInt8](repeating: 0, count: DirectoryFormat.headerSize)
            let got = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            throw DirectoryFile.classifyShort(Array(head.prefix(max(0, got))), size: size, path: path)
        }
        guard let mapped = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), mapped != MAP_FAILED else {
            throw .system(path: path, operation: "map", errno: errno)
        }
        let base = UnsafeRawPointer(mapped)
        let header: DirectoryHeader
        let layout: DirectoryLayout
        let verifier: BlockVerifier?
        do {
            header = try DirectoryHeader.decode(UnsafeRawBufferPointer(start: base, count: DirectoryFormat.headerSize),
                                                actualSize: size, path: path)
            // decode checked that the counts describe this layout.
            layout = header.layout!
            verifier = header.formatVersion >= 2
                ? try BlockVerifier(path: path, base: base, layout: layout, rootChecksum: header.contentChecksum) : nil
        } catch {
            munmap(mapped, size)
            throw error
        }
        var slot: Int32 = -1
        var watch: Int32 = -1
        if guarded {
            slot = lookupd_guard_register(mapped, size)
            watch = slot < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0)
            guard slot >= 0, watch >= 0 else {
                let code = errno
                if slot >= 0 { lookupd_guard_unregister(slot) }
                munmap(mapped, size)
                throw .system(path: path, operation: "guard the mapping (too many directory files mapped at once)", errno: slot < 0 ? EMFILE : code)
            }
        }
        guardSlot = slot
        watchFD = watch
        mappedModified = st.st_mtim
        // Lookups jump around; read-ahead would only waste page cache.
        _ = madvise(mapped, size, MADV_RANDOM)
        self.path = path
        self.header = header
        self.layout = layout
        self.verifier = verifier
        verifiedBits = verifier?.bits
        blockShift = verifier?.shift ?? 63
        self.base = base
        self.size = size
        self.keys = (base + Int(header.keysOffset)).assumingMemoryBound(to: UInt64.self)
        self.values = (base + Int(header.valuesOffset)).assumingMemoryBound(to: UInt32.self)
        self.prefixes = base + Int(header.prefixesOffset)
        self.labelIndex = (base + Int(header.labelIndexOffset)).assumingMemoryBound(to: UInt32.self)
        self.labelData = (base + Int(header.labelDataOffset)).assumingMemoryBound(to: UInt8.self)
        self.entryCount = Int(header.entryCount)
        nodeCount = layout.nodes ? layout.slotCount / 8 : 0
        self.prefixCount = Int(header.prefixCount)
        self.labelCount = Int(header.labelCount)
        self.labelDataSize = Int(header.labelDataSize)
    }

    /// Reads and checks only the header of the file at `path` (with pread,
    /// no mapping): enough to tell what a file is before deciding to load it.
    public static func readHeader(path: String) throws(DirectoryError) -> DirectoryHeader {
        // Non-blocking open: a FIFO put in the file's place must not hang the caller.
        let fd: FileDescriptor
        do { fd = try openRegularFile(path, maxBytes: Int.max).0 } catch { throw DirectoryError(error) }
        defer { fd.close() }
        return try readHeader(descriptor: fd, path: path)
    }

    /// The checked header of an open file (its size from fstat): magic, version, header
    /// checksum, size and section bounds, before anything else of the file is read or copied.
    public static func readHeader(descriptor fd: FileDescriptor, path: String) throws(DirectoryError) -> DirectoryHeader {
        let status: FileStatus
        do { status = try fd.status() } catch { throw .system(path: path, operation: "stat", errno: error.rawValue) }
        guard status.isRegular else { throw .corrupt(path: path, reason: "not a regular file") }
        var head = [UInt8](repeating: 0, count: DirectoryFormat.headerSize)
        let got: Int
        do {
            got = try head.withMutableBytes { (raw) throws(Errno) in try fd.readFully(into: raw, at: 0) }
        } catch {
            throw .system(path: path, operation: "read", errno: error.rawValue)
        }
        let result = head.withUnsafeBytes { raw in
            Result { () throws(DirectoryError) in
                try DirectoryHeader.decode(UnsafeRawBufferPointer(rebasing: raw[0..<got]), actualSize: Int(status.size), path: path)
            }
        }
        return try result.get()
    }

    private static func classifyShort(_ head: [UInt8], size: Int, path: String) -> DirectoryError {
        let outcome = head.withUnsafeBytes { raw in
            Result { () throws(DirectoryError) in try DirectoryHeader.decode(raw, actualSize: size, path: path) }
        }
        if case .failure(let error) = outcome { return error }
        return .truncated(path: path, expected: nil, actual: size)
    }

    deinit {
        // Out of the guard before the pages go: the range may be mapped again by anything.
        if guardSlot >= 0 { lookupd_guard_unregister(guardSlot) }
        if watchFD >= 0 { close(watchFD) }
        munmap(UnsafeMutableRawPointer(mutating: base), size)
    }

    // MARK: - Served straight from disk

    /// The file is mapped itself (not a private copy) and guarded.
    public var isGuarded: Bool { guardSlot >= 0 }

    /// A guarded file that faulted (a page gone: truncated in place, or
    /// unreadable) or was marked damaged: lookups throw from now on.
    public var isDamaged: Bool { guardSlot >= 0 && lookupd_guard_damaged(guardSlot) != 0 }

    /// Stops every lookup from answering (the file changed in place).
    public func markDamaged() {
        if guardSlot >= 0 { lookupd_guard_mark(guardSlot) }
    }

    /// Faults the SIGBUS guard absorbed in this process, all files together.
    public static var guardedFaults: UInt64 { lookupd_guard_faults() }

    /// How a guarded file changed since it was mapped (fstat of the mapped
    /// inode: its size, its modification time), nil while it has not.
    /// Renaming another file over the path does not change this one.
    public func changeOnDisk() -> String? {
        guard watchFD >= 0 else { return nil }
        var st = stat()
        guard fstat(watchFD, &st) == 0 else { return "cannot stat it: \(String(cString: strerror(errno)))" }
        if Int(st.st_size) != size { return "its size changed from \(size) to \(st.st_size) bytes" }
        if st.st_mtim.tv_sec != mappedModified.tv_sec || st.st_mtim.tv_nsec != mappedModified.tv_nsec { return "it was written to" }
        return nil
    }

    /// After the reads that decided a lookup: were they from a damaged mapping?
    @inline(__always)
    private func checkGuard() throws(DirectoryError) {
        if guardSlot >= 0, lookupd_guard_damaged(guardSlot) != 0 { throw .changedWhileServed(path: path) }
    }

    /// Calls `body` with label `id`'s bytes (see `labelBytes`). For a
    /// guarded file, with a copy taken before asking whether a page of the
    /// mapping was replaced by zeros, and an empty label when one was:
    /// bytes read from the mapping after that check could come from a page
    /// replaced after it. (A file merely marked changed still holds the
    /// bytes the lookup checked unless it was rewritten in place, the
    /// window docs/FORMAT.md describes.)
    @inlinable
    public func withLabel<R>(_ id: UInt32, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        if let result = try withIntactLabel(id, body) { return result }
        return try body(UnsafeRawBufferPointer(start: nil, count: 0))
    }

    /// `withLabel`, but nil (and `body` not called) when a page of a guarded
    /// mapping was replaced by zeros before the copy was taken: the label
    /// the lookup verified is gone, and an answer without it would be one
    /// the file never gave. The caller decides again (the lookup now throws).
    ///
    /// Inlined into the caller, where `R` is known: called in other modules as a generic
    /// function, it instantiated the metadata of `Optional<R>` on every call (some 550
    /// instructions per blocked request, which reads its label twice).
    @inlinable
    public func withIntactLabel<R>(_ id: UInt32, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R? {
        var result: R?
        try withIntactLabelBytes(id) { result = try body($0) }
        return result
    }

    /// `withIntactLabel`'s work, not generic; `body` is not called when the label vanished.
    @usableFromInline
    func withIntactLabelBytes(_ id: UInt32, _ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        let bytes = labelBytes(id)
        guard guardSlot >= 0 else { return try body(bytes) }
        guard bytes.count > 0 else { return lookupd_guard_faulted(guardSlot) != 0 ? () : try body(bytes) }
        // Most labels fit a fixed buffer on the stack.
        if bytes.count <= 256 {
            var room = InlineArray<256, UInt8>(repeating: 0)
            return try withUnsafeMutableBytes(of: &room) { copy in
                lookupd_guard_copy(copy.baseAddress!, bytes.baseAddress!, bytes.count)
                if lookupd_guard_faulted(guardSlot) != 0 { return }
                try body(UnsafeRawBufferPointer(start: copy.baseAddress, count: bytes.count))
            }
        }
        return try withUnsafeTemporaryAllocation(byteCount: bytes.count, alignment: 1) { copy in
            lookupd_guard_copy(copy.baseAddress!, bytes.baseAddress!, bytes.count)
            if lookupd_guard_faulted(guardSlot) != 0 { return }
            try body(UnsafeRawBufferPointer(copy))
        }
    }

    public var count: Int { entryCount }
    public var prefixRuleCount: Int { prefixCount }
    public var labelTableCount: Int { labelCount }

    // MARK: - Verification on first touch

    /// Every byte has been verified: lookups check nothing more.
    public var isFullyVerified: Bool { trusted.load(ordering: .acquiring) }

    /// The first damage any lookup met, nil while none did. For the daemon:
    /// a lookup that throws has already said so; this is for logs and metrics.
    public var damage: DirectoryError? {
        if let verifier { return verifier.firstDamage }
        return wholeFileCheck.withLock { $0 ?? nil }
    }

    /// Makes sure the bytes `offset ..< offset + count` are verified before
    /// they are used.
    @inline(__always)
    private func ensure(_ offset: Int, _ count: Int) throws(DirectoryError) {
        if trusted.load(ordering: .acquiring) { return }
        if isVerified(offset, count) { return }
        try ensureSlow(offset, count)
    }

    /// Whether the bytes `offset ..< offset + count` lie in at most two blocks that are both
    /// verified, read from the bitmap without calling the verifier; false sends the caller
    /// to `ensureSlow`, which checks whatever is left.
    @inline(__always)
    private func isVerified(_ offset: Int, _ count: Int) -> Bool {
        guard let bits = verifiedBits else { return false }
        let first = (offset &- DirectoryFormat.headerSize) >> blockShift
        let last = (offset &+ max(count, 1) &- 1 &- DirectoryFormat.headerSize) >> blockShift
        return last &- first <= 1 && BlockVerifier.isMarked(first, in: bits) && BlockVerifier.isMarked(last, in: bits)
    }

    private func ensureSlow(_ offset: Int, _ count: Int) throws(DirectoryError) {
        if let verifier {
            try verifier.ensure(offset, count)
            if verifier.isComplete { trusted.store(true, ordering: .releasing) }
            return
        }
        // Version 1: one checksum over everything, so everything at once.
        let outcome = wholeFileCheck.withLock { (state: inout DirectoryError??) -> DirectoryError? in
            if case .some(let done) = state { return done }
            let result: DirectoryError?
            do throws(DirectoryError) { try verifyWholeVersion1(); result = nil } catch { result = error }
            state = .some(result)
            return result
        }
        if let outcome { throw outcome }
        trusted.store(true, ordering: .releasing)
    }

    // MARK: - Lookup

    /// The entry for `number`: its exact entry if there is one, otherwise the
    /// longest prefix rule covering it. Throws when a block it needs is damaged.
    public func lookup(_ number: PhoneNumber) throws(DirectoryError) -> DirectoryEntry? {
        let found: DirectoryEntry?
        if let value = try exactValue(number.value) {
            found = try entry(value: value, match: .exact(number))
        } else {
            found = try prefixLookup(number)
        }
        try checkGuard()
        return found
    }

    /// Bit L set when the file has prefix rules of L digits.
    public var prefixLengthMask: UInt32 { header.prefixLengthMask }

    /// The exact entry for `number`, ignoring prefix rules.
    public func exactLookup(_ number: PhoneNumber) throws(DirectoryError) -> DirectoryEntry? {
        let value = try exactValue(number.value)
        try checkGuard()
        guard let value else { return nil }
        return try entry(value: value, match: .exact(number))
    }

    /// The rule for the first `length` digits of `number`, if the file has
    /// one of exactly that length (the caller walks the lengths, so that a
    /// journal overlay can take part in the longest-prefix order).
    public func prefixLookup(_ number: PhoneNumber, length: Int) throws(DirectoryError) -> DirectoryEntry? {
        let digits = number.digitCount
        guard length >= 1, length <= digits, header.prefixLengthMask & (1 << UInt32(length)) != 0 else { return nil }
        let prefixDigits = number.value / powersOfTen[digits - length]
        let value = try prefixValue(UInt64(length) << 56 | prefixDigits)
        try checkGuard()
        guard let value else { return nil }
        return try entry(value: value, match: .prefix(NumberPrefix(digits: prefixDigits, length: length)!))
    }

    /// The entry stored for exactly this number or exactly this prefix rule
    /// (a number covered only by a rule has none).
    public func storedEntry(_ pattern: NumberPattern) throws(DirectoryError) -> DirectoryEntry? {
        switch pattern {
        case .exact(let number):
            return try exactLookup(number)
        case .prefix(let prefix):
            let value = try prefixValue(DirectoryFormat.prefixKey(prefix))
            try checkGuard()
            guard let value else { return nil }
            return try entry(value: value, match: pattern)
        }
    }

    /// Eytzinger search: the keys are a sorted array laid out breadth-first,
    /// so the first levels share cache lines and the children four levels
    /// down can be prefetched while comparing (16 keys = two cache lines).
    func exactValue(_ x: UInt64) throws(DirectoryError) -> UInt32? {
        if layout.nodes { return try nodeValue(x) }
        let keys = self.keys
        let n = entryCount
        var k = 1
        if trusted.load(ordering: .acquiring) {
            while k <= n {
                // Both lines of the sixteen slots four levels down: with only the first, half
                // the searches waited on the second (250 against 275 ns at 10^7).
                lookupd_prefetch(keys + 16 &* k)
                lookupd_prefetch(keys + (16 &* k &+ 8))
                // A branch, not a branch-free step: measured here, speculating
                // down the predicted child starts its cache miss early and beats
                // a cmov that waits for every load (560 vs 865 ns at 10^7).
                k = 2 &* k &+ (keys[k] < x ? 1 : 0)
            }
        } else {
            let keysOffset = layout.keysOffset
            while k <= n {
                lookupd_prefetch(keys + 16 &* k)
                let offset = keysOffset &+ 8 &* k
                if !isVerified(offset, 8) { try ensureSlow(offset, 8) }
                k = 2 &* k &+ (keys[k] < x ? 1 : 0)
            }
        }
        k >>= (~k).trailingZeroBitCount + 1
        guard k != 0, keys[k] == x else { return nil }
        try ensure(layout.valuesOffset + 4 * k, 4)
        return values[k]
    }

    /// `exactValue` in nodes of eight: one node per level, the candidate the smallest key
    /// not below `x` met so far (the last one met is the tightest).
    private func nodeValue(_ x: UInt64) throws(DirectoryError) -> UInt32? {
        let keys = self.keys
        let nodes = nodeCount
        let checked = !trusted.load(ordering: .acquiring)
        let keysOffset = layout.keysOffset
        var node = 0
        var candidate = -1
        if !checked {
            candidate = lookupd_search_nodes(keys, nodes, x)
            node = nodes
        }
        while node < nodes {
            if checked {
                let offset = keysOffset &+ 64 &* node
                if !isVerified(offset, 64) { try ensureSlow(offset, 64) }
            }
            let i = KeyNodes.rank(keys + 8 &* node, x)
            if i < 8 { candidate = 8 &* node &+ i }
            node = 9 &* node &+ i &+ 1
        }
        guard candidate >= 0, keys[candidate] == x else { return nil }
        try ensure(layout.valuesOffset &+ 4 &* candidate, 4)
        return values[candidate]
    }

    // MARK: - Batched lookup

    /// How many searches `lookupBatch` interleaves. One search waits on a DRAM read at
    /// nearly every level below the cached top of the tree; 32 independent ones moving down
    /// a level each in turn keep that many reads in flight, and the lanes' state (32 slots
    /// and the numbers) stays in two or three cache lines.
    public static let batchWidth = 32

    /// `lookup` of every number, with the exact searches run `batchWidth` at a time,
    /// interleaved: `results[i]` is what `lookup(numbers[i])` would return or throw. The same
    /// checks as one lookup: an unverified file has every key slot, value and label a search
    /// reads verified first, so a damaged block fails only the lookups that read it; a guarded
    /// file is asked after every read of the batch whether its mapping was damaged. Prefix
    /// rules, looked up only for the numbers with no exact entry, are searched one at a time.
    public func lookupBatch(_ numbers: UnsafeBufferPointer<PhoneNumber>,
                            into results: UnsafeMutableBufferPointer<Result<DirectoryEntry?, DirectoryError>>) {
        precondition(results.count >= numbers.count, "lookupBatch: fewer results than numbers")
        guard let first = numbers.baseAddress, let out = results.baseAddress else { return }
        var done = 0
        while done < numbers.count {
            let width = min(Self.batchWidth, numbers.count - done)
            lookupLanes(first + done, width, out + done)
            done += width
        }
    }

    /// Descends the tree for every number as `lookupBatch` does, answering nothing: the key
    /// slots on each path and the value slot it ends on are in the cache afterwards, so the
    /// lookups that follow (through a decision path that looks numbers up one by one: contacts,
    /// policies, journals, several directories) wait on no DRAM read. Reads without checks,
    /// which is safe because nothing read here decides an answer: a slot number only picks the
    /// next slot, within the section, and every byte an answer uses is checked by that lookup.
    public func prefetchBatch(_ numbers: UnsafeBufferPointer<PhoneNumber>) {
        guard let first = numbers.baseAddress else { return }
        let keys = self.keys, values = self.values
        var slots = InlineArray<32, Int>(repeating: 1)
        withUnsafeMutableBytes(of: &slots) { raw in
            let ks = raw.baseAddress!.assumingMemoryBound(to: Int.self)
            var done = 0
            while done < numbers.count {
                let width = min(Self.batchWidth, numbers.count - done)
                if layout.nodes {
                    descendNodes(first + done, width, ks, nil)
                    for j in 0..<width where ks[j] >= 0 { lookupd_prefetch(values + ks[j]) }
                } else {
                    for j in 0..<width { ks[j] = 1 }
                    descendTrusted(first + done, width, ks)
                    for j in 0..<width {
                        var k = ks[j]
                        k >>= (~k).trailingZeroBitCount &+ 1
                        lookupd_prefetch(keys + k)
                        lookupd_prefetch(values + k)
                    }
                }
                done += width
            }
        }
    }

    /// One batch of at most `batchWidth` lookups.
    private func lookupLanes(_ numbers: UnsafePointer<PhoneNumber>, _ width: Int,
                             _ results: UnsafeMutablePointer<Result<DirectoryEntry?, DirectoryError>>) {
        var slots = InlineArray<32, Int>(repeating: 1)
        withUnsafeMutableBytes(of: &slots) { raw in
            let ks = raw.baseAddress!.assumingMemoryBound(to: Int.self)
            // Bit j: lane j met a damaged block; results[j] already holds why.
            var failed: UInt64 = 0
            if layout.nodes {
                // Each lane ends on its candidate slot (-1: none).
                failed = descendNodes(numbers, width, ks, trusted.load(ordering: .acquiring) ? nil : results)
            } else {
                if trusted.load(ordering: .acquiring) {
                    descendTrusted(numbers, width, ks)
                } else {
                    failed = descendChecked(numbers, width, ks, results)
                }
                for j in 0..<width {
                    var k = ks[j]
                    k >>= (~k).trailingZeroBitCount &+ 1
                    ks[j] = k == 0 ? -1 : k
                }
            }
            // Every lane's value slot fetched before any is read: the values are a second
            // array, one more DRAM read per lookup, which one lane at a time would wait for
            // in turn.
            for j in 0..<width where ks[j] >= 0 { lookupd_prefetch(values + ks[j]) }
            for j in 0..<width where failed & (1 << UInt64(j)) == 0 {
                let k = ks[j]
                let number = numbers[j]
                do throws(DirectoryError) {
                    let found: DirectoryEntry?
                    if k >= 0, keys[k] == number.value {
                        try ensure(layout.valuesOffset &+ 4 &* k, 4)
                        found = try entry(value: values[k], match: .exact(number))
                    } else {
                        found = try prefixLookup(number)
                    }
                    results[j] = .success(found)
                } catch {
                    results[j] = .failure(error)
                    failed |= 1 << UInt64(j)
                }
            }
            // One question for the whole batch, after its last read: a page that vanished
            // during any lane's search makes every answer of the batch suspect, as it would
            // each single lookup that read before the check.
            if guardSlot >= 0, lookupd_guard_damaged(guardSlot) != 0 {
                for j in 0..<width where failed & (1 << UInt64(j)) == 0 { results[j] = .failure(.changedWhileServed(path: path)) }
            }
        }
    }

    /// The searches of a batch, every lane one level down per step, in a file whose bytes are
    /// all known good. `ks[j]` starts at 1 and ends past the leaves, as `k` in `exactValue`.
    /// Every lane is at the same depth after each step, so all but the last level need no test
    /// of the slot against the count. Each step prefetches the eight slots three levels down
    /// (8k ..< 8k + 8: one cache line, the keys start 64-byte aligned), of which the lane will
    /// read one: two more rounds of every lane pass before it gets there, more than a DRAM
    /// read here. Four levels down (16k, two lines, one of them never read) doubles the lines
    /// in flight for the same hits (docs/BENCHMARKS.md, "Batched lookups"); the lone search
    /// fetches both lines at 16k because it has no other lanes' reads to share the bus with
    /// and nothing else to do meanwhile.
    @inline(__always)
    private func descendTrusted(_ numbers: UnsafePointer<PhoneNumber>, _ width: Int, _ ks: UnsafeMutablePointer<Int>) {
        let keys = self.keys
        let n = entryCount
        let levels = Int.bitWidth &- n.leadingZeroBitCount
        guard levels > 0 else { return }
        var level = 1
        while level < levels {
            for j in 0..<width {
                let k = ks[j]
                lookupd_prefetch(keys + 8 &* k)
                ks[j] = 2 &* k &+ (keys[k] < numbers[j].value ? 1 : 0)
            }
            level &+= 1
        }
        for j in 0..<width {
            let k = ks[j]
            if k <= n { ks[j] = 2 &* k &+ (keys[k] < numbers[j].value ? 1 : 0) }
        }
    }

    /// `descendTrusted` for a file not yet fully verified: every slot is checked before it is
    /// read, as in `exactValue`, and a lane whose slot lies in a damaged block stops there with
    /// the error in `results`. Returns the failed lanes as bits.
    private func descendChecked(_ numbers: UnsafePointer<PhoneNumber>, _ width: Int, _ ks: UnsafeMutablePointer<Int>,
                                _ results: UnsafeMutablePointer<Result<DirectoryEntry?, DirectoryError>>) -> UInt64 {
        let keys = self.keys
        let n = entryCount
        let keysOffset = layout.keysOffset
        var failed: UInt64 = 0
        var active = true
        while active {
            active = false
            for j in 0..<width where failed & (1 << UInt64(j)) == 0 {
                let k = ks[j]
                guard k <= n else { continue }
                active = true
                lookupd_prefetch(keys + 8 &* k)
                guard laneMayRead(keysOffset &+ 8 &* k, 8, j, results, &failed) else { continue }
                ks[j] = 2 &* k &+ (keys[k] < numbers[j].value ? 1 : 0)
            }
        }
        return failed
    }

    /// In a batch over a file not yet fully verified: whether lane `j` may read these bytes
    /// (their blocks verified now if need be). When a block fails, the lane stops there: its
    /// error goes to `results[j]` and its bit into `failed`.
    @inline(__always)
    private func laneMayRead(_ offset: Int, _ count: Int, _ j: Int,
                             _ results: UnsafeMutablePointer<Result<DirectoryEntry?, DirectoryError>>, _ failed: inout UInt64) -> Bool {
        if isVerified(offset, count) { return true }
        do throws(DirectoryError) {
            try ensureSlow(offset, count)
            return true
        } catch {
            results[j] = .failure(error)
            failed |= 1 << UInt64(j)
            return false
        }
    }

    /// The searches of a batch in nodes of eight, every lane one node down per round. A lane
    /// is done when it steps past the last node (the last level is not full, so lanes finish
    /// a round apart); `ks[j]` ends as its candidate slot, or -1. Each step prefetches the
    /// lane's next node, which the other lanes' steps give time to arrive. `results` non-nil:
    /// the file is not yet fully verified, each node is checked before it is read, and a lane
    /// whose node lies in a damaged block stops with the error there. Returns the failed lanes.
    @inline(__always)
    private func descendNodes(_ numbers: UnsafePointer<PhoneNumber>, _ width: Int, _ ks: UnsafeMutablePointer<Int>,
                              _ results: UnsafeMutablePointer<Result<DirectoryEntry?, DirectoryError>>?) -> UInt64 {
        let keys = self.keys
        let nodes = nodeCount
        let keysOffset = layout.keysOffset
        var failed: UInt64 = 0
        guard let results else {
            UnsafeRawPointer(numbers).withMemoryRebound(to: UInt64.self, capacity: width) { xs in
                lookupd_search_nodes_batch(keys, nodes, xs, ks, width)
            }
            return 0
        }
        var candidates = InlineArray<32, Int>(repeating: -1)
        withUnsafeMutableBytes(of: &candidates) { raw in
            let cs = raw.baseAddress!.assumingMemoryBound(to: Int.self)
            for j in 0..<width { ks[j] = 0 }
            var active = nodes > 0
            while active {
                active = false
                for j in 0..<width {
                    let node = ks[j]
                    guard node < nodes, failed & (1 << UInt64(j)) == 0 else { continue }
                    active = true
                    guard laneMayRead(keysOffset &+ 64 &* node, 64, j, results, &failed) else { continue }
                    let i = KeyNodes.rank(keys + 8 &* node, numbers[j].value)
                    if i < 8 { cs[j] = 8 &* node &+ i }
                    let child = 9 &* node &+ i &+ 1
                    ks[j] = child
                    if child < nodes { lookupd_prefetch(keys + 8 &* child) }
                }
            }
            for j in 0..<width { ks[j] = cs[j] }
        }
        return failed
    }

    func prefixLookup(_ number: PhoneNumber) throws(DirectoryError) -> DirectoryEntry? {
        var mask = header.prefixLengthMask
        guard mask != 0 else { return nil }
        let digits = number.digitCount
        // Longest prefix first: a longer rule is more specific.
        mask &= digits >= 31 ? ~0 : (UInt32(2) << UInt32(digits)) &- 1
        while mask != 0 {
            let length = 31 - mask.leadingZeroBitCount
            mask &= ~(UInt32(1) << UInt32(length))
            let prefixDigits = number.value / powersOfTen[digits - length]
            let key = UInt64(length) << 56 | prefixDigits
            if let value = try prefixValue(key) {
                return try entry(value: value, match: .prefix(NumberPrefix(digits: prefixDigits, length: length)!))
            }
        }
        return nil
    }

    private func prefixKey(at i: Int) -> UInt64 {
        UInt64(littleEndian: prefixes.loadUnaligned(fromByteOffset: i * 16, as: UInt64.self))
    }

    private func prefixValueWord(at i: Int) -> UInt32 {
        UInt32(littleEndian: prefixes.loadUnaligned(fromByteOffset: i * 16 + 8, as: UInt32.self))
    }

    private func prefixValue(_ key: UInt64) throws(DirectoryError) -> UInt32? {
        var lo = 0
        var hi = prefixCount
        while lo < hi {
            let mid = (lo + hi) >> 1
            try ensure(layout.prefixesOffset + mid * 16, 16)
            let k = prefixKey(at: mid)
            if k < key { lo = mid + 1 } else if k > key { hi = mid } else { return prefixValueWord(at: mid) }
        }
        return nil
    }

    /// The entry for a value word; its label's bytes are verified here, so
    /// that `labelBytes` of a label a lookup returned needs no check.
    private func entry(value: UInt32, match: NumberPattern) throws(DirectoryError) -> DirectoryEntry {
        let labelPlusOne = DirectoryFormat.labelPlusOne(value)
        // A label number past the table can only come from a damaged file
        // that was not verified; treat it as no label rather than trust it.
        let label: UInt32? = labelPlusOne == 0 || Int(labelPlusOne) > labelCount ? nil : labelPlusOne - 1
        if let label, !trusted.load(ordering: .acquiring) { try ensureLabel(label) }
        // Served from disk: the label's pages are read now, before the lookup asks whether
        // its mapping was damaged, not only when the answer is written.
        if let label, guardSlot >= 0 { touchLabel(label) }
        return DirectoryEntry(blocked: value & 1 != 0, allowed: DirectoryFormat.allows(value), label: label, match: match)
    }

    private func touchLabel(_ id: UInt32) {
        let i = Int(id)
        let start = Int(UInt32(littleEndian: labelIndex[i]))
        let end = Int(UInt32(littleEndian: labelIndex[i + 1]))
        guard start < end, end <= labelDataSize else { return }
        lookupd_guard_touch(labelData + start, end - start)
    }

    /// Verifies label `id`'s two index entries and its bytes.
    private func ensureLabel(_ id: UInt32) throws(DirectoryError) {
        let i = Int(id)
        try ensure(layout.labelIndexOffset + 4 * i, 8)
        let start = Int(UInt32(littleEndian: labelIndex[i]))
        let end = Int(UInt32(littleEndian: labelIndex[i + 1]))
        guard start < end, end <= labelDataSize else { return }
        try ensure(layout.labelDataOffset + start, end - start)
    }

    // MARK: - Labels

    /// The UTF-8 bytes of a label, read from the mapping. Valid while this
    /// object lives. For a label a lookup (or the iteration) returned,
    /// whose bytes it verified; any other is verified here, and a label
    /// that is damaged or out of range reads as empty.
    public func labelBytes(_ id: UInt32) -> UnsafeRawBufferPointer {
        let i = Int(id)
        guard i < labelCount else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        if !trusted.load(ordering: .acquiring) {
            do { try ensureLabel(id) } catch { return UnsafeRawBufferPointer(start: nil, count: 0) }
        }
        let start = Int(UInt32(littleEndian: labelIndex[i]))
        let end = Int(UInt32(littleEndian: labelIndex[i + 1]))
        guard start <= end, end <= labelDataSize, end - start <= DirectoryFormat.maxLabelBytes else {
            return UnsafeRawBufferPointer(start: nil, count: 0)
        }
        return UnsafeRawBufferPointer(start: labelData + start, count: end - start)
    }

    public func label(_ id: UInt32) -> String {
        String(decoding: labelBytes(id), as: UTF8.self)
    }

    // MARK: - Iteration

    /// Calls `body` for every exact entry in ascending number order, then for
    /// every prefix rule in ascending (length, digits) order. Throws, before
    /// handing it over, for an entry in a damaged block.
    public func forEachEntry(_ body: (DirectoryEntry) -> Void) throws(DirectoryError) {
        try forEachExactInOrder { (key, value) throws(DirectoryError) in
            body(try entry(value: value, match: .exact(PhoneNumber(unchecked: key))))
        }
        for i in 0..<prefixCount {
            try ensure(layout.prefixesOffset + i * 16, 16)
            let key = prefixKey(at: i)
            let length = Int(key >> 56)
            let digits = key & ((1 << 56) - 1)
            guard let prefix = NumberPrefix(digits: digits, length: length) else { continue }
            body(try entry(value: prefixValueWord(at: i), match: .prefix(prefix)))
        }
    }

    /// In-order walk of the Eytzinger tree, i.e. ascending key order.
    /// `checked`: verify each slot's blocks first (false only for the
    /// structural pass, which runs on bytes whose checksums matched).
    func forEachExactInOrder(checked: Bool = true, _ body: (UInt64, UInt32) throws(DirectoryError) -> Void) throws(DirectoryError) {
        let n = entryCount
        guard n > 0 else { return }
        if layout.nodes {
            var walk = KeyNodes.InOrder(nodeCount: nodeCount)
            for _ in 0..<n {
                let k = walk.slot
                if checked {
                    try ensure(layout.keysOffset + 8 * k, 8)
                    try ensure(layout.valuesOffset + 4 * k, 4)
                }
                // The header's count and the padding must agree, or a walk would list the
                // padding as a number, or stop before the last one.
                guard keys[k] != DirectoryFormat.paddingKey else {
                    throw .corrupt(path: path, reason: "slot \(k) is padding where the header counts \(n) numbers")
                }
                try body(keys[k], values[k])
                walk.advance()
            }
            if !walk.isDone {
                let k = walk.slot
                if checked { try ensure(layout.keysOffset + 8 * k, 8) }
                guard keys[k] == DirectoryFormat.paddingKey else {
                    throw .corrupt(path: path, reason: "slot \(k) holds a number after the \(n) the header counts")
                }
            }
            return
        }
        // Descend left as far as possible, then climb: iterative so depth
        // never matters; the path is at most 64 nodes.
        var k = 1
        while 2 * k <= n { k *= 2 }
        while true {
            if checked {
                try ensure(layout.keysOffset + 8 * k, 8)
                try ensure(layout.valuesOffset + 4 * k, 4)
            }
            try body(keys[k], values[k])
            if 2 * k + 1 <= n {
                k = 2 * k + 1
                while 2 * k <= n { k *= 2 }
            } else {
                // Climb while we are a right child.
                while k & 1 == 1 { k >>= 1 }
                k >>= 1
                if k == 0 { return }
            }
        }
    }

    // MARK: - Verification

    /// Checks every block's checksum (version 2) or the content checksum
    /// (version 1), without the structural checks of `verify()`: what
    /// `lookupd inspect` reports. Returns the damaged ranges found (the
    /// first `limit`) and how many there are.
    public func verifyBlocks(limit: Int = 10) -> (damaged: [DirectoryError], total: Int) {
        guard let verifier else {
            do { try checkContentChecksumVersion1() } catch { return ([error], 1) }
            return ([], 0)
        }
        let mapped = UnsafeMutableRawPointer(mutating: base)
        _ = madvise(mapped, size, MADV_SEQUENTIAL)
        defer { _ = madvise(mapped, size, MADV_RANDOM) }
        let found = verifier.verifyAll(limit: limit)
        if found.total == 0 { trusted.store(true, ordering: .releasing) }
        return found
    }

    /// Full check of the content: every checksum, ascending keys without
    /// duplicates, valid value words and prefix rules, well-formed labels
    /// and the counts in the header. Reads the whole file. Afterwards
    /// lookups check nothing more.
    public func verify() throws(DirectoryError) {
        if verifier == nil {
            try ensureSlow(0, 0)
            return
        }
        let found = verifyBlocks(limit: 1)
        if let first = found.damaged.first { throw first }
        try verifyStructure()
        trusted.store(true, ordering: .releasing)
    }

    private func checkContentChecksumVersion1() throws(DirectoryError) {
        let mapped = UnsafeMutableRawPointer(mutating: base)
        _ = madvise(mapped, size, MADV_SEQUENTIAL)
        defer { _ = madvise(mapped, size, MADV_RANDOM) }
        let content = UnsafeRawBufferPointer(start: base + DirectoryFormat.headerSize, count: size - DirectoryFormat.headerSize)
        guard XXH64.hash(content) == header.contentChecksum else { throw .contentChecksumMismatch(path: path) }
    }

    private func verifyWholeVersion1() throws(DirectoryError) {
        try checkContentChecksumVersion1()
        try verifyStructure()
    }

    /// The structural checks, on bytes whose checksums already matched.
    private func verifyStructure() throws(DirectoryError) {
        if layout.nodes {
            // The slots after the last number, in in-order: the padding of the last node.
            var walk = KeyNodes.InOrder(nodeCount: nodeCount)
            for _ in 0..<entryCount { walk.advance() }
            while !walk.isDone {
                guard keys[walk.slot] == DirectoryFormat.paddingKey, values[walk.slot] == 0 else {
                    throw .corrupt(path: path, reason: "padding slot \(walk.slot) after the last number is not padding")
                }
                walk.advance()
            }
        } else {
            guard keys[0] == 0, values[0] == 0 else { throw .corrupt(path: path, reason: "unused slot 0 is not zero") }
        }
        var previous: UInt64? = nil
        var blocked: UInt64 = 0
        var identified: UInt64 = 0
        var problem: String? = nil
        try forEachExactInOrder(checked: false) { key, value in
            if problem == nil {
                if let p = previous, key <= p {
                    problem = key == p ? "duplicate number +\(key)" : "numbers not in ascending order at +\(key)"
                } else if PhoneNumber(value: key) == nil {
                    problem = "+\(key) is not a valid E.164 number"
                } else if let reason = checkValue(value) {
                    problem = "entry +\(key): \(reason)"
                }
            }
            if value & 1 != 0 { blocked += 1 }
            if DirectoryFormat.labelPlusOne(value) != 0 { identified += 1 }
            previous = key
        }
        if let problem { throw .corrupt(path: path, reason: problem) }

        var mask: UInt32 = 0
        var previousPrefix: UInt64? = nil
        for i in 0..<prefixCount {
            let key = prefixKey(at: i)
            let value = prefixValueWord(at: i)
            let length = Int(key >> 56)
            guard NumberPrefix(digits: key & ((1 << 56) - 1), length: length) != nil else {
                throw .corrupt(path: path, reason: "prefix rule \(i) is not a valid prefix")
            }
            if let p = previousPrefix, key <= p { throw .corrupt(path: path, reason: "prefix rules not in ascending order at rule \(i)") }
            if let reason = checkValue(value) { throw .corrupt(path: path, reason: "prefix rule \(i): \(reason)") }
            guard prefixes.loadUnaligned(fromByteOffset: i * 16 + 12, as: UInt32.self) == 0 else {
                throw .corrupt(path: path, reason: "prefix rule \(i): reserved word is not zero")
            }
            if value & 1 != 0 { blocked += 1 }
            if DirectoryFormat.labelPlusOne(value) != 0 { identified += 1 }
            mask |= 1 << UInt32(length)
            previousPrefix = key
        }
        guard mask == header.prefixLengthMask else { throw .corrupt(path: path, reason: "prefix length mask does not match the prefix rules") }
        guard blocked == header.blockedCount, identified == header.identifiedCount else {
            throw .corrupt(path: path, reason: "blocked/identified counts do not match the entries")
        }

        guard labelIndex[0] == 0, Int(labelIndex[labelCount]) == labelDataSize else {
            throw .corrupt(path: path, reason: "label index does not span the label data")
        }
        var previousLabel: UnsafeRawBufferPointer? = nil
        for i in 0..<labelCount {
            let start = Int(labelIndex[i]), end = Int(labelIndex[i + 1])
            guard start < end, end <= labelDataSize else { throw .corrupt(path: path, reason: "label \(i) has bad offsets") }
            let bytes = UnsafeRawBufferPointer(start: labelData + start, count: end - start)
            if let reason = LabelRules.problem(bytes) { throw .corrupt(path: path, reason: "label \(i): \(reason)") }
            if let p = previousLabel, !p.lexicographicallyPrecedes(bytes) {
                throw .corrupt(path: path, reason: "labels not in ascending order at label \(i)")
            }
            previousLabel = bytes
        }
    }

    private func checkValue(_ value: UInt32) -> String? {
        if value == 0 { return "neither blocks nor identifies" }
        let labelPlusOne = DirectoryFormat.labelPlusOne(value)
        if Int(labelPlusOne) > labelCount { return "label number \(labelPlusOne - 1) is past the label table" }
        if DirectoryFormat.allows(value) {
            if value & 1 != 0 { return "both blocks and allows" }
            if header.formatVersion < DirectoryFormat.allowVersion { return "an allow entry in a version-\(header.formatVersion) file" }
        }
        return nil
    }
}
