import Synchronization
import Glibc
import SystemCalls

/// The automata cache: a calling code's validity automaton (`CallingCodeTables`) as compiled
/// by `CallingCode`, one file per calling code beside the numbering cache, so that a short
/// command reads China's tables instead of compiling its number patterns again (some 12.8
/// million instructions, a third of a warm `lookupd query`; docs/BENCHMARKS.md "Start-up").
/// docs/FORMAT.md "Automata cache" gives the layout.
///
/// Never a different answer from compiling: a file is used only when its checksum holds, its
/// version is `version`, its key equals the one computed now — that version, the lookupd
/// executable (path, device, inode, size, modification time: another build may derive
/// differently without anyone bumping the version), the metadata's fingerprint, the calling
/// code, and a digest of every input the derivation reads (each region's patterns, lengths,
/// leading digits, flags) — and every index in its tables is in range. Anything else and the
/// code is compiled, then the file replaced atomically. The tables are used in place: the
/// file is read once into memory kept for the process, and the tables point into it.
enum AutomataCache {
    static let magic: [UInt8] = Array("LKDAUTM\0".utf8)
    /// Bump whenever `CallingCode`'s derivation or this layout changes.
    static let version: UInt32 = 1
    /// China's tables are some 100 KB; a larger file is not ours.
    static let maxBytes = 16 << 20
    static let header = 24
    static let rowLength = CallingCode.maxLength + 1

    static func fileName(_ cc: Int) -> String { "automata-v\(version)-\(cc).cache" }

    /// Whether this process writes the tables it had to compile. `lookupd serve` reads the
    /// cache but writes nothing (`NumberingData.readAutomataCacheOnly()`): the daemon meets
    /// a calling code first on a worker thread, in the middle of a call, where writing and
    /// fsyncing a file would hold that call up; a long-lived process gains little from it.
    static let writes = Atomic<Bool>(true)

    /// The executable that derives the tables, as the key names it; nil when it cannot be
    /// identified (then no automata cache is read or written).
    static let buildIdentity: [UInt8]? = {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        let path = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let st = FileSystem.statusIfPresent(path), st.isRegular else { return nil }
        var w = ByteWriter()
        w.string(path)
        w.status(st)
        return w.bytes
    }()

    /// What the tables of calling code `cc` belong to (see the type's comment).
    static func key(countryCode cc: Int, members: [Int], all: NumberingData.TerritoryList, fingerprint: UInt64,
                    build: [UInt8]) -> [UInt8] {
        var inputs = ByteWriter()
        for t in members {
            let territory = all[t]
            inputs.u32(UInt32(t))
            inputs.string(territory.id)
            inputs.u8(territory.sameMobileAndFixedLinePattern ? 1 : 0)
            for d in territory.descriptions {
                inputs.optionalString(d.pattern)
                inputs.u32(d.lengths?.bits ?? 0xFFFF_FFFF)
            }
            inputs.optionalString(territory.leadingDigits)
        }
        var w = ByteWriter()
        w.u32(version)
        w.bytes(build)
        w.u64(fingerprint)
        w.u32(UInt32(cc))
        w.u32(UInt32(members.count))
        w.u64(XXH64.hash(inputs.bytes))
        return w.bytes
    }

    // MARK: the file

    static func encode(_ code: CallingCode, key: [UInt8]) -> [UInt8] {
        let t = code.tables
        var p = ByteWriter()
        p.bytes(key)
        while p.bytes.count % 4 != 0 { p.u8(0) }
        for n in [code.stateCount, code.rowCount, t.territoryCount, code.generalStateCount, code.problems.count] {
            p.u32(UInt32(n))
        }
        func ints(_ base: UnsafePointer<Int32>, _ n: Int) { for i in 0..<n { p.u32(UInt32(bitPattern: base[i])) } }
        ints(t.territories, t.territoryCount)
        ints(t.next, code.stateCount * 10)
        ints(t.answerRow, code.stateCount)
        for i in 0..<(code.rowCount * rowLength) { p.u32(t.answers[i]) }
        ints(t.generalStart, t.territoryCount)
        ints(t.generalNext, code.generalStateCount * 10)
        for i in 0..<code.generalStateCount { p.u8(t.generalAccepting[i] ? 1 : 0) }
        while p.bytes.count % 4 != 0 { p.u8(0) }
        for problem in code.problems { p.string(problem) }
        return ByteWriter.sealed(magic: magic, version: version, payload: p.bytes)
    }

    /// The tables of calling code `cc` from `bytes`, when they are whole, of this version, for
    /// `key` and `members`, and every index in them in range; else why not.
    static func decode(_ bytes: [UInt8], countryCode cc: Int, members: [Int], key: [UInt8])
        -> Result<CallingCode, NumberingCache.DecodeProblem> {
        guard bytes.count >= header + 8, bytes[0..<8].elementsEqual(magic) else { return .failure("not an automata cache") }
        // The tables are read in place as native integers: little-endian only.
        guard 1.littleEndian == 1 else { return .failure("big-endian host") }
        let size = bytes.count
        let memory = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        bytes.withUnsafeBytes { memory.copyMemory(from: $0.baseAddress!, byteCount: size) }
        let result = check(UnsafeRawPointer(memory), size: size, countryCode: cc, members: members, key: key)
        // Kept for the life of the process when the tables point into it, as the compiled
        // tables are (CallingCode.copy).
        if case .failure = result { memory.deallocate() }
        return result
    }

    private static func check(_ base: UnsafeRawPointer, size: Int, countryCode cc: Int, members: [Int], key: [UInt8])
        -> Result<CallingCode, NumberingCache.DecodeProblem> {
        func u32(_ at: Int) -> UInt32 { base.loadUnaligned(fromByteOffset: at, as: UInt32.self) }
        guard u32(8) == version else { return .failure("another format version") }
        let length = base.loadUnaligned(fromByteOffset: 16, as: UInt64.self)
        guard u32(12) == 0, length == UInt64(size - header - 8) else { return .failure("truncated or extended") }
        guard base.loadUnaligned(fromByteOffset: size - 8, as: UInt64.self)
                == XXH64.hash(UnsafeRawBufferPointer(start: base, count: size - 8)) else {
            return .failure("checksum mismatch")
        }
        let end = size - 8
        var at = header
        /// `n` 4-byte fields from `at` (4-aligned), nil past the payload's end.
        func take(_ n: Int) -> Int? {
            guard n >= 0, n <= (end - at) / 4 else { return nil }
            defer { at += 4 * n }
            return at
        }
        guard let keyAt = take(1) else { return .failure("malformed") }
        let keyLength = Int(u32(keyAt))
        guard keyLength <= end - at else { return .failure("malformed") }
        guard UnsafeRawBufferPointer(start: base + at, count: keyLength).elementsEqual(key) else { return .failure("stale") }
        at += (keyLength + 3) & ~3
        guard at <= end, let countsAt = take(5) else { return .failure("malformed") }
        let stateCount = Int(u32(countsAt)), rowCount = Int(u32(countsAt + 4)), territoryCount = Int(u32(countsAt + 8))
        let generalCount = Int(u32(countsAt + 12)), problemCount = Int(u32(countsAt + 16))
        guard stateCount >= 1, stateCount < 1 << 24, rowCount >= 1, rowCount < 1 << 20, territoryCount == members.count,
              territoryCount < 256, generalCount < 1 << 24,
              let territoriesAt = take(territoryCount), let nextAt = take(stateCount * 10),
              let answerRowAt = take(stateCount), let answersAt = take(rowCount * rowLength),
              let generalStartAt = take(territoryCount), let generalNextAt = take(generalCount * 10),
              let acceptingAt = take((generalCount + 3) / 4) else { return .failure("malformed") }
        // Every index the hot path follows without a bounds check, checked once here.
        func ints(_ from: Int, _ n: Int) -> UnsafePointer<Int32> {
            (base + from).assumingMemoryBound(to: Int32.self)
        }
        func all(_ from: Int, _ n: Int, in range: ClosedRange<Int32>) -> Bool {
            let p = ints(from, n)
            for i in 0..<n where !range.contains(p[i]) { return false }
            return true
        }
        let territories = ints(territoriesAt, territoryCount)
        for (i, t) in members.enumerated() where territories[i] != Int32(t) { return .failure("stale") }
        guard all(nextAt, stateCount * 10, in: -1...Int32(stateCount - 1)),
              all(answerRowAt, stateCount, in: 0...Int32(rowCount - 1)),
              all(generalStartAt, territoryCount, in: -1...Int32(generalCount - 1)),
              all(generalNextAt, generalCount * 10, in: -1...Int32(generalCount - 1)) else {
            return .failure("index out of range")
        }
        let answers = (base + answersAt).assumingMemoryBound(to: UInt32.self)
        for i in 0..<(rowCount * rowLength) {
            let a = answers[i], region = a & 0xFF
            guard a >> 16 == 0, (a >> 8) & 0xFF <= UInt32(NumberType.unknown.rawValue),
                  region == UInt32(ValidityAnswer.none) || region < UInt32(territoryCount) else {
                return .failure("index out of range")
            }
        }
        let accepting = (base + acceptingAt).assumingMemoryBound(to: UInt8.self)
        for i in 0..<generalCount where accepting[i] > 1 { return .failure("malformed") }
        for i in generalCount..<((generalCount + 3) & ~3) where accepting[i] != 0 { return .failure("malformed") }
        var problems: [String] = []
        for _ in 0..<problemCount {
            guard let lengthAt = take(1) else { return .failure("malformed") }
            let n = Int(u32(lengthAt))
            guard n <= end - at,
                  let s = String(validating: UnsafeRawBufferPointer(start: base + at, count: n), as: UTF8.self) else {
                return .failure("malformed")
            }
            problems.append(s)
            at += n
        }
        guard at == end else { return .failure("malformed") }
        let tables = CallingCodeTables(
            next: ints(nextAt, stateCount * 10), answerRow: ints(answerRowAt, stateCount), answers: UnsafePointer(answers),
            generalStart: ints(generalStartAt, territoryCount), generalNext: ints(generalNextAt, generalCount * 10),
            generalAccepting: UnsafeRawPointer(accepting).assumingMemoryBound(to: Bool.self), territories: territories,
            territoryCount: territoryCount)
        return .success(CallingCode(countryCode: cc, territories: members, tables: tables, stateCount: stateCount,
                                    rowCount: rowCount, generalStateCount: generalCount, problems: problems))
    }

    /// Calling code `cc`'s tables from the cache in `folder` when it holds them for this
    /// build and these inputs, else compiled (and the file replaced); with where they came from.
    static func load(folder: String?, countryCode cc: Int, members: [Int], all: NumberingData.TerritoryList, fingerprint: UInt64)
        -> (CallingCode, origin: String) {
        guard let folder, let build = buildIdentity else {
            return (CallingCode(countryCode: cc, territories: members, all: all), "compiled (no automata cache)")
        }
        let path = folder + "/" + fileName(cc)
        let key = key(countryCode: cc, members: members, all: all, fingerprint: fingerprint, build: build)
        let note: String
        if let bytes = try? readRegularFile(path, maxBytes: maxBytes) {
            switch decode(bytes, countryCode: cc, members: members, key: key) {
            case .success(let code): return (code, "cache")
            case .failure(let problem): note = problem.description
            }
        } else {
            note = "absent"
        }
        let code = CallingCode(countryCode: cc, territories: members, all: all)
        guard writes.load(ordering: .relaxed) else { return (code, "compiled (cache \(note); read-only in this process)") }
        do {
            try NumberingCache.makeFolders(folder)
            try writeFileAtomically(path, contents: encode(code, key: key), permissions: 0o644)
        } catch {
            return (code, "compiled (cache \(note); not written: \(error))")
        }
        return (code, "compiled (cache \(note))")
    }
}
