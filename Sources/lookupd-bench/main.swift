import Directory
import Glibc

// lookupd-bench: measurements behind docs/BENCHMARKS.md. Build and run with
//   swift run -c release lookupd-bench directory [--sizes 1e6,1e7,1e8]
//   swift run -c release lookupd-bench compile [--entries 1e7]
// Figures are medians of repeated rounds; the machine is noisy, so compare
// only runs taken together.

let usage = """
Usage: lookupd-bench directory [--sizes N,N,...] [--rounds R] [--dir PATH]
       lookupd-bench lookups [--sizes N,N,...] [--rounds R] [--dir PATH] [--file-format 4|2] [--json]
       lookupd-bench compile [--entries N] [--dir PATH]
       lookupd-bench blocks [--entries N] [--shifts S,S,...] [--probes P] [--dir PATH] [--keep SHIFT]
       lookupd-bench generate [--entries N] [--range FIRST-LAST] [--exclude FILE]

directory  for each size: write a directory file of N random numbers, time
           opening it, and time lookups of random members (hits) and random
           non-members (misses), warm; both independent lookups (throughput)
           and dependent ones (each key chosen from the previous answer:
           latency). Also a plain sorted-array binary search for comparison.
lookups    for each size: write a directory of N entries (with --dir, reuse
           DIR/batch-N.lkd if it is there and intact, and keep it), verify it (the
           daemon's case: no checks left), and measure, each the median of R
           rounds in this thread's CPU time (wall time beside it, and the load
           average, since the machine is shared):
             floor_ns     dependent random 8-byte reads over the file's own keys
                          section, mapped as the directory maps it: what one
                          DRAM (and page-walk) round trip costs at that size
             floor_thp_ns the same over anonymous memory of the same size with
                          MADV_HUGEPAGE, for the huge pages a file mapping here
                          does not get (thp_kb says how much was huge)
             single_ns    independent `lookup` of random members, one by one
             batched_ns   the same numbers through `lookupBatch`, 32 at a time
             prefetch_single_ns  `prefetchBatch` of 32, then `lookup` of each:
                          what a caller whose decisions look up one by one gets
           --file-format 2 writes (or takes from DIR) files in binary order, the
           format before 4, for the comparison (default 4, nodes of eight).
           --json prints one object per size with those fields, entries, the
           load average before and after, and file_pmd_kb / shmem_pmd_kb: how
           much of the two mappings of the file the kernel mapped with huge
           pages (a file on a tmpfs mounted huge=always gets them; one on ext4
           here only where the page cache happens to hold 2 MiB folios).
compile    write a CSV of N lines (blocked and labelled numbers) and time
           `DirectoryCompiler` + `DirectoryWriter` on it, as `lookupd compile` runs.
blocks     for each checksum block size 2^S: write a directory of N entries,
           and measure the size the checksums add, one lookup in a freshly
           opened file (what one `lookupd query` costs: open, root check,
           first-touch verification of every block the lookup reads), the
           blocks hashed per lookup, lookups once every block is verified,
           checking every block (inspect) and the full check. --keep S
           leaves that size's file as DIR/blocks-S.lkd for timing the CLI.
generate   write a CSV of N lines to standard output, for
           `lookupd-bench generate --entries 1e9 | lookupd compile - -o big.lkd`:
           N distinct numbers over +86 13x..19x in a scattered order, half
           blocked with one of 10,000 labels, half identified with one of
           100,000; holds nothing, so any N costs the same memory.
           --range FIRST-LAST (E.164 digits, e.g. 8613000000000-8619999999999)
           spreads the N numbers evenly over that range instead of
           7 apart from +8613000000000; --exclude FILE leaves out every
           number FILE holds (one a line, first field, as in a CSV), so
           that FILE's own entries can be compiled beside the output
           without conflicts (how many were left out goes to stderr).

"""

struct Options {
    var shifts: [UInt32] = [9, 10, 12, 14, 16]
    var probes = 2000
    var keep: UInt32? = nil
    var sizes: [Int] = [1_000_000, 10_000_000]
    var rounds = 9
    var entries = 10_000_000
    var dir = "/tmp"
    var range: (first: UInt64, last: UInt64)? = nil
    var exclude: String? = nil
    var dirGiven = false
    var json = false
    var fileFormat: UInt32 = DirectoryFormat.version
}

func parseCount(_ text: Substring) -> Int? {
    if let v = Int(text) { return v }
    let parts = text.lowercased().split(separator: "e")
    if parts.count == 2, let m = Double(parts[0]), let e = Int(parts[1]) { return Int(m * pow(10, Double(e))) }
    return nil
}

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    return s.isEmpty ? 0 : s[s.count / 2]
}

func say(_ text: String) {
    var line = text + "\n"
    line.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
}

/// To standard error: what `generate` says beside the CSV it writes to standard output.
func warn(_ text: String) {
    var line = text + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// Deterministic xorshift so every run draws the same numbers.
struct Random {
    var state: UInt64
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
    mutating func below(_ n: UInt64) -> UInt64 { next() % n }
}

/// n distinct numbers, ascending, spread over +86 13x..19x (13 digits).
func sortedNumbers(_ n: Int, seed: UInt64) -> [UInt64] {
    let low: UInt64 = 8_613_000_000_000, high: UInt64 = 8_620_000_000_000
    let gap = max(UInt64(2), (high - low) / UInt64(n) * 2 - 1)
    var rng = Random(state: seed)
    var keys = [UInt64]()
    keys.reserveCapacity(n)
    var x = low
    for _ in 0..<n {
        x += 1 + rng.below(gap)
        keys.append(x)
    }
    return keys
}

func directoryBenchmark(_ options: Options) {
    say("| entries | file size | write s | open µs (median of 100) | hit ns/op indep. | miss ns/op indep. | hit ns/op dependent | miss ns/op dependent | sorted-array hit ns/op dependent |")
    say("|---|---|---|---|---|---|---|---|---|")
    for n in options.sizes {
        let content = benchContent(n)
        let path = "\(options.dir)/lookupd-bench-\(n).lkd"
        let t0 = now()
        do { try DirectoryWriter.write(content, to: path) } catch { say("write failed: \(error)"); exit(1) }
        let writeSeconds = now() - t0

        var opens: [Double] = []
        for _ in 0..<100 {
            let t = now()
            let f = try! DirectoryFile(path: path)
            opens.append((now() - t) * 1e6)
            _ = f.count
        }
        let file = try! DirectoryFile(path: path)
        // Warm the page cache and the mapping.
        _ = try? file.verify()

        let probes = 1_000_000
        var hits = [PhoneNumber](), misses = [PhoneNumber]()
        hits.reserveCapacity(probes)
        misses.reserveCapacity(probes)
        var r = Random(state: 7)
        let keys = content.exactKeys
        for _ in 0..<probes { hits.append(PhoneNumber(value: keys[Int(r.below(UInt64(n)))])!) }
        while misses.count < probes {
            let k = keys[0] + r.below(keys[n - 1] - keys[0])
            if !binarySearch(keys, k) { misses.append(PhoneNumber(value: k)!) }
        }

        func independent(_ probes: [PhoneNumber]) -> Double {
            var samples: [Double] = []
            var found = 0
            for _ in 0..<options.rounds {
                let t = now()
                for p in probes where (try? file.lookup(p)) != nil { found += 1 }
                samples.append((now() - t) * 1e9 / Double(probes.count))
            }
            if found == -1 { say("") }
            return median(samples)
        }
        /// Each probe index depends on the previous answer, so lookups cannot
        /// overlap: this is the latency of one lookup.
        func dependent(_ probes: [PhoneNumber]) -> Double {
            var samples: [Double] = []
            var carry = 0
            for _ in 0..<options.rounds {
                let t = now()
                var i = 0
                for _ in 0..<probes.count {
                    let e = try! file.lookup(probes[i])
                    carry &+= e == nil ? 1 : Int(e!.blocked ? 3 : 5)
                    i = (i &+ 1 &+ (carry & 1)) % probes.count
                }
                samples.append((now() - t) * 1e9 / Double(probes.count))
            }
            if carry == -1 { say("") }
            return median(samples)
        }
        func sortedDependent(_ probes: [PhoneNumber]) -> Double {
            var samples: [Double] = []
            var carry = 0
            keys.withUnsafeBufferPointer { k in
                for _ in 0..<3 {
                    let t = now()
                    var i = 0
                    for _ in 0..<probes.count {
                        let found = binarySearch(k, probes[i].value)
                        carry &+= found ? 3 : 1
                        i = (i &+ 1 &+ (carry & 1)) % probes.count
                    }
                    samples.append((now() - t) * 1e9 / Double(probes.count))
                }
            }
            if carry == -1 { say("") }
            return median(samples)
        }
        let size = file.header.fileSize
        say("| \(n) | \(size / 1_000_000) MB | \(fmt(writeSeconds)) | \(fmt(median(opens))) | \(fmt(independent(hits))) | \(fmt(independent(misses))) | \(fmt(dependent(hits))) | \(fmt(dependent(misses))) | \(fmt(sortedDependent(hits))) |")
        unlink(path)
    }
}

// MARK: - lookups: the random-read floor, one lookup, batched lookups

func threadSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func loadAverage() -> String {
    guard let f = fopen("/proc/loadavg", "r") else { return "?" }
    defer { fclose(f) }
    var line = [CChar](repeating: 0, count: 128)
    guard fgets(&line, 128, f) != nil else { return "?" }
    return String(cString: line).split(separator: " ").prefix(3).joined(separator: " ")
}

/// A kB field of /proc/self/smaps_rollup (AnonHugePages, FilePmdMapped): whether the
/// kernel gave huge pages to this process's mappings.
func smapsKB(_ field: String) -> Int {
    guard let f = fopen("/proc/self/smaps_rollup", "r") else { return -1 }
    defer { fclose(f) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, 256, f) != nil {
        let text = String(cString: line)
        if text.hasPrefix(field + ":") {
            return Int(text.dropFirst(field.count + 1).split(separator: " ").first ?? "") ?? -1
        }
    }
    return -1
}

/// One measured figure: thread CPU and wall time per operation, medians over rounds.
struct Timing {
    var cpu: [Double] = []
    var wall: [Double] = []
    mutating func measure(_ operations: Int, _ body: () -> Void) {
        let w = now(), c = threadSeconds()
        body()
        cpu.append((threadSeconds() - c) * 1e9 / Double(operations))
        wall.append((now() - w) * 1e9 / Double(operations))
    }
    var ns: Double { median(cpu) }
    var wallNs: Double { median(wall) }
}

/// Dependent random 8-byte reads over `slots` words at `base`: each index comes from the
/// word read before, so no two reads overlap. The words must differ (keys do; a filled
/// buffer is filled with distinct values), or the chase would fall into a short cycle.
@inline(never)
func chase(_ base: UnsafePointer<UInt64>, slots: Int, steps: Int) -> UInt64 {
    var index = 1
    var sum: UInt64 = 0
    for step in 0..<steps {
        let word = base[index]
        sum &+= word
        let mixed = (word ^ UInt64(truncatingIfNeeded: step)) &* 0x9E37_79B9_7F4A_7C15
        index = Int(truncatingIfNeeded: UInt64(slots).multipliedFullWidth(by: mixed).high)
    }
    return sum
}

func lookupsBenchmark(_ options: Options) {
    if !options.json {
        say("| entries | load 1/5/15 | floor ns (file mapping) | floor ns (anon, THP) | single ns | batched ns | prefetch+single ns | single ÷ floor | wall: floor / single / batched |")
        say("|---|---|---|---|---|---|---|---|---|")
    }
    for n in options.sizes {
        let path = "\(options.dir)/batch-\(n).lkd"
        var file: DirectoryFile? = nil
        if options.dirGiven, let existing = try? DirectoryFile(path: path), existing.count == n,
           (existing.header.formatVersion >= DirectoryFormat.nodesVersion) == (options.fileFormat >= DirectoryFormat.nodesVersion),
           (try? existing.verify()) != nil {
            file = existing
        }
        if file == nil {
            do { try DirectoryWriter.write(benchContent(n), to: path, formatVersion: options.fileFormat) } catch { say("write failed: \(error)"); exit(1) }
            file = try! DirectoryFile(path: path)
            // Every block checked once, as the daemon does before serving: lookups check nothing.
            try! file!.verify()
        }
        let directory = file!
        let loadBefore = loadAverage()

        // The same file mapped again, to read its keys section as the directory does (the
        // page cache's pages, 4 KiB mappings), and to draw the probes from it.
        let fd = open(path, O_RDONLY)
        let size = Int(directory.header.fileSize)
        guard fd >= 0, let mapped = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), mapped != MAP_FAILED else { say("cannot map \(path)"); exit(1) }
        close(fd)
        _ = madvise(mapped, size, MADV_RANDOM)
        // Asked for, to record what the kernel does with it (file_pmd_kb): here it maps no
        // huge pages for a file outside tmpfs.
        _ = madvise(mapped, size, MADV_HUGEPAGE)
        let keys = UnsafePointer<UInt64>((UnsafeRawPointer(mapped) + Int(directory.header.keysOffset)).assumingMemoryBound(to: UInt64.self))
        // Binary order: slots 1...n; nodes of eight: n rounded up to eight, padding last.
        let nodes = directory.header.formatVersion >= DirectoryFormat.nodesVersion
        let slots = nodes ? (n + 7) & ~7 : n + 1

        let pool = 1 << 20, perRound = 1 << 18
        var rng = Random(state: 0x5EED ^ UInt64(n))
        var probes: [PhoneNumber] = []
        probes.reserveCapacity(pool)
        while probes.count < pool {
            let key = keys[(nodes ? 0 : 1) + Int(rng.below(UInt64(slots - 1)))]
            if let number = PhoneNumber(value: key) { probes.append(number) }
        }

        var floor = Timing(), floorHuge = Timing(), single = Timing(), batched = Timing(), prefetched = Timing()
        var sink: UInt64 = 0
        // Warm the mapping's page tables once, so the first round is not a page-fault round.
        sink &+= chase(keys, slots: slots, steps: 1 << 16)

        // The floor without the 4 KiB pages: anonymous memory of the keys' size, huge pages asked for.
        let anonBytes = slots * 8
        guard let anon = mmap(nil, anonBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), anon != MAP_FAILED else { say("cannot map \(anonBytes) bytes"); exit(1) }
        _ = madvise(anon, anonBytes, MADV_HUGEPAGE)
        let words = anon.assumingMemoryBound(to: UInt64.self)
        for j in 0..<slots { words[j] = UInt64(j) &* 0xD6E8_FEB8_6659_FD93 }
        let thpKB = smapsKB("AnonHugePages")
        let filePmdKB = smapsKB("FilePmdMapped"), shmemPmdKB = smapsKB("ShmemPmdMapped")

        var results = [Result<DirectoryEntry?, DirectoryError>](repeating: .success(nil), count: DirectoryFile.batchWidth)
        var found = 0
        probes.withUnsafeBufferPointer { all in
            results.withUnsafeMutableBufferPointer { out in
                for round in 0..<options.rounds {
                    let start = (round * perRound) % pool
                    let these = UnsafeBufferPointer(rebasing: all[start..<(start + perRound)])
                    floor.measure(perRound) { sink &+= chase(keys, slots: slots, steps: perRound) }
                    floorHuge.measure(perRound) { sink &+= chase(UnsafePointer(words), slots: slots, steps: perRound) }
                    single.measure(perRound) {
                        for p in these where (try? directory.lookup(p)) != nil { found += 1 }
                    }
                    batched.measure(perRound) {
                        var at = 0
                        while at < perRound {
                            let width = min(DirectoryFile.batchWidth, perRound - at)
                            directory.lookupBatch(UnsafeBufferPointer(rebasing: these[at..<(at + width)]), into: out)
                            for j in 0..<width { if case .success(_?) = out[j] { found += 1 } }
                            at += width
                        }
                    }
                    prefetched.measure(perRound) {
                        var at = 0
                        while at < perRound {
                            let width = min(DirectoryFile.batchWidth, perRound - at)
                            let chunk = UnsafeBufferPointer(rebasing: these[at..<(at + width)])
                            directory.prefetchBatch(chunk)
                            for p in chunk where (try? directory.lookup(p)) != nil { found += 1 }
                            at += width
                        }
                    }
                }
            }
        }
        munmap(anon, anonBytes)
        munmap(mapped, size)
        // Every probe is a member: anything else is a lookup that went wrong.
        guard found == 3 * perRound * options.rounds else { say("lookups found \(found) of \(3 * perRound * options.rounds) members"); exit(1) }
        if sink == 42 { say("") }
        let load = loadAverage()
        if options.json {
            say("{\"entries\":\(n),\"floor_ns\":\(fmt(floor.ns)),\"single_ns\":\(fmt(single.ns)),\"batched_ns\":\(fmt(batched.ns)),"
                + "\"prefetch_single_ns\":\(fmt(prefetched.ns)),\"floor_thp_ns\":\(fmt(floorHuge.ns)),\"thp_kb\":\(thpKB),\"file_pmd_kb\":\(filePmdKB),\"shmem_pmd_kb\":\(shmemPmdKB),"
                + "\"floor_wall_ns\":\(fmt(floor.wallNs)),\"single_wall_ns\":\(fmt(single.wallNs)),\"batched_wall_ns\":\(fmt(batched.wallNs)),"
                + "\"format\":\(directory.header.formatVersion),\"load_before\":\"\(loadBefore)\",\"load_after\":\"\(load)\",\"clock\":\"thread cpu\",\"rounds\":\(options.rounds),\"lookups_per_round\":\(perRound)}")
        } else {
            say("| \(n) | \(load) | \(fmt(floor.ns)) | \(fmt(floorHuge.ns)) | \(fmt(single.ns)) | \(fmt(batched.ns)) | \(fmt(prefetched.ns)) | \(fixed(single.ns / floor.ns, 2)) | \(fmt(floor.wallNs)) / \(fmt(single.wallNs)) / \(fmt(batched.wallNs)) |")
        }
        if !options.dirGiven { unlink(path) }
    }
}

func binarySearch<C: RandomAccessCollection>(_ keys: C, _ x: UInt64) -> Bool where C.Element == UInt64, C.Index == Int {
    var lo = keys.startIndex, hi = keys.endIndex
    while lo < hi {
        let mid = (lo + hi) >> 1
        if keys[mid] < x { lo = mid + 1 } else { hi = mid }
    }
    return lo < keys.endIndex && keys[lo] == x
}

func fmt(_ x: Double) -> String {
    if x >= 100 { return String(Int(x.rounded())) }
    return String(Double(Int(x * 10)) / 10)
}

/// The content of the directory benchmark: n random numbers, half blocked,
/// half labelled from 5,000 labels.
func benchContent(_ n: Int) -> DirectoryContent {
    var content = DirectoryContent()
    content.exactKeys = sortedNumbers(n, seed: 0x9E37_79B9 ^ UInt64(n))
    var rng = Random(state: 42)
    let labelCount = 5000
    content.labels = (0..<labelCount).map { Array("Label \(100000 + $0)".utf8) }
    content.exactValues = (0..<n).map { _ in
        let r = rng.below(2 * UInt64(labelCount))
        return r < UInt64(labelCount) ? 1 : UInt32(r - UInt64(labelCount) + 1) << 1
    }
    return content
}

/// `x` with `digits` decimals (no Foundation here).
func fixed(_ x: Double, _ digits: Int) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let v = Int((x * scale).rounded())
    let whole = v / Int(scale), frac = v % Int(scale)
    let f = String(frac)
    return "\(whole)." + String(repeating: "0", count: digits - f.count) + f
}

func percentile(_ xs: [Double], _ p: Double) -> Double {
    let s = xs.sorted()
    return s.isEmpty ? 0 : s[min(s.count - 1, Int(Double(s.count) * p))]
}

func blocksBenchmark(_ options: Options) {
    let n = options.entries
    let t0 = now()
    let content = benchContent(n)
    say("content of \(n) entries built in \(fmt(now() - t0)) s")
    say("| block | file size | checksums add | write s | open+1 lookup, fresh file, µs median | p99 | blocks hashed per lookup | lookup ns once verified | verify every block s | full check s |")
    say("|---|---|---|---|---|---|---|---|---|---|")
    var rng = Random(state: 7)
    let probes = (0..<options.probes).map { _ in PhoneNumber(value: content.exactKeys[Int(rng.below(UInt64(n)))])! }
    for shift in options.shifts {
        let path = "\(options.dir)/blocks-\(shift).lkd"
        let tw = now()
        do { try DirectoryWriter.write(content, to: path, blockShift: shift) } catch { say("write failed: \(error)"); exit(1) }
        let writeSeconds = now() - tw
        // Warm the page cache with the whole file: "warm" means in memory.
        let warm = try! DirectoryFile(path: path)
        let tb = now()
        let found = warm.verifyBlocks()
        let blocksSeconds = now() - tb
        guard found.total == 0 else { say("damaged: \(found.damaged)"); exit(1) }
        let full = try! DirectoryFile(path: path)
        let tf = now()
        try! full.verify()
        let fullSeconds = now() - tf

        var fresh: [Double] = []
        var hashed = 0
        for p in probes {
            let t = now()
            let file = try! DirectoryFile(path: path)
            let entry = try! file.lookup(p)
            fresh.append((now() - t) * 1e6)
            if entry == nil { say("lost +\(p.value)"); exit(1) }
            hashed += file.verifier!.verifiedBlockCount
        }
        // Lookups in a file whose blocks are all verified: the daemon's case.
        var verified: [Double] = []
        var carry = 0
        for _ in 0..<5 {
            let t = now()
            for p in probes where (try? warm.lookup(p)) != nil { carry &+= 1 }
            verified.append((now() - t) * 1e9 / Double(probes.count))
        }
        if carry == -1 { say("") }
        let h = warm.header
        let overhead = Double(h.fileSize - h.contentEnd) / Double(h.contentEnd) * 100
        say("| \(1 << Int(shift)) B | \(h.fileSize / 1_000_000) MB | \(fixed(overhead, 3)) % | \(fmt(writeSeconds)) | \(fmt(median(fresh))) | \(fmt(percentile(fresh, 0.99))) | \(fmt(Double(hashed) / Double(probes.count))) | \(fmt(median(verified))) | \(fixed(blocksSeconds, 2)) | \(fixed(fullSeconds, 2)) |")
        if options.keep != shift { unlink(path) }
    }
}

func compileBenchmark(_ options: Options) {
    let n = options.entries
    let csv = "\(options.dir)/lookupd-bench-\(n).csv"
    let out = "\(options.dir)/lookupd-bench-compiled-\(n).lkd"
    // Unsorted input, as real feeds are: shuffle by writing in a scattered order.
    let keys = sortedNumbers(n, seed: 1234)
    guard let f = fopen(csv, "w") else { say("cannot write \(csv)"); exit(1) }
    fputs("number,action,label\n", f)
    var rng = Random(state: 99)
    let stride = 7_919
    for i in 0..<n {
        let k = keys[(i &* stride) % n]
        if rng.below(2) == 0 {
            fputs("+\(k),block,Spam \(rng.below(10000))\n", f)
        } else {
            fputs("+\(k),identify,Business \(rng.below(100000))\n", f)
        }
    }
    fclose(f)
    var st = stat()
    stat(csv, &st)
    let t0 = now()
    let compiler = DirectoryCompiler()
    do { try compiler.add(path: csv) } catch { say("read failed: \(error)"); exit(1) }
    let t1 = now()
    guard case .success(let content) = compiler.finish() else { say("compile failed: \(compiler.diagnostics.prefix(3))"); exit(1) }
    let t2 = now()
    do { try DirectoryWriter.write(content, to: out) } catch { say("write failed: \(error)"); exit(1) }
    let t3 = now()
    say("| lines | CSV size | read+validate s | sort+dedupe s | write s | total s | lines/s |")
    say("|---|---|---|---|---|---|---|")
    say("| \(n) | \(Int(st.st_size) / 1_000_000) MB | \(fmt(t1 - t0)) | \(fmt(t2 - t1)) | \(fmt(t3 - t2)) | \(fmt(t3 - t0)) | \(Int(Double(n) / (t3 - t0))) |")
    unlink(csv)
    unlink(out)
}

/// The numbers of a file, one a line: the leading `+` and digits of each line (a CSV's first
/// field); lines that do not start with a number (headers) are skipped.
func numbersIn(_ path: String) -> Set<UInt64> {
    guard let file = fopen(path, "r") else { warn("generate: cannot read \(path)"); exit(1) }
    defer { fclose(file) }
    var numbers = Set<UInt64>()
    var line: UnsafeMutablePointer<CChar>? = nil
    var capacity = 0
    defer { free(line) }
    while getline(&line, &capacity, file) > 0, let text = line {
        var p = text
        if p.pointee == 0x2B { p += 1 }  // "+"
        var value: UInt64 = 0
        var digits = 0
        while p.pointee >= 0x30 && p.pointee <= 0x39 && digits < 19 {
            value = value * 10 + UInt64(p.pointee - 0x30)
            digits += 1
            p += 1
        }
        if digits > 0 { numbers.insert(value) }
    }
    return numbers
}

/// `generate`: the distinct numbers low + step * j + (a jitter below step from j),
/// for j = i * P mod n with P prime to n, which visits every j once in a
/// scattered order; step is 7 from +8613000000000, or the range's length over n with
/// --range; formatted by hand (string interpolation would cost more than the compile
/// it feeds). Numbers --exclude names are skipped.
func generateCSV(_ options: Options) {
    let n = UInt64(options.entries)
    guard n > 0, n <= 1_000_000_000 else { say("generate: --entries must be 1...1e9"); exit(2) }
    var low: UInt64 = 8_613_000_000_000
    var step: UInt64 = 7
    if let range = options.range {
        low = range.first
        step = (range.last - range.first + 1) / n
        guard step >= 1 else { warn("generate: --range holds fewer than --entries numbers"); exit(2) }
    }
    let excluded = options.exclude.map(numbersIn) ?? []
    var skipped = 0
    func gcd(_ a: UInt64, _ b: UInt64) -> UInt64 { b == 0 ? a : gcd(b, a % b) }
    var multiplier: UInt64 = 2_654_435_761
    while gcd(multiplier, n) != 1 { multiplier += 2 }
    let size = 1 << 20
    let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: size)
    var used = 0
    func flush() {
        var done = 0
        while done < used {
            let w = write(1, buffer + done, used - done)
            if w <= 0 { exit(1) }
            done += w
        }
        used = 0
    }
    func put(_ text: StaticString) {
        text.withUTF8Buffer { b in
            for c in b { buffer[used] = c; used += 1 }
        }
    }
    func put(_ value: UInt64) {
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var v = value
        withUnsafeMutableBytes(of: &digits) { d in
            repeat {
                d[count] = UInt8(truncatingIfNeeded: v % 10) &+ 0x30
                count += 1
                v /= 10
            } while v > 0
            while count > 0 {
                count -= 1
                buffer[used] = d[count]
                used += 1
            }
        }
    }
    put("number,action,label\n")
    var rng = Random(state: 99)
    for i in 0..<n {
        if used > size - 64 { flush() }
        let j = (i &* multiplier) % n
        var mix = j &* 0x9E37_79B9_7F4A_7C15
        mix ^= mix >> 29
        let number = low + step * j + mix % step
        let block = rng.below(2) == 0
        if !excluded.isEmpty && excluded.contains(number) { skipped += 1; continue }
        put("+")
        put(number)
        if block {
            put(",block,Spam ")
            put(rng.below(10000))
        } else {
            put(",identify,Business ")
            put(rng.below(100000))
        }
        put("\n")
    }
    flush()
    if options.exclude != nil { warn("generate: \(n - UInt64(skipped)) numbers written, \(skipped) left out (in --exclude)") }
}

var options = Options()
var args = Array(CommandLine.arguments.dropFirst())
guard let mode = args.first else { print(usage, terminator: ""); exit(2) }
args.removeFirst()
var i = 0
while i < args.count {
    let a = args[i]
    let value = i + 1 < args.count ? args[i + 1] : ""
    switch a {
    case "--sizes": options.sizes = value.split(separator: ",").compactMap(parseCount); i += 1
    case "--rounds": options.rounds = Int(value) ?? options.rounds; i += 1
    case "--entries": options.entries = parseCount(Substring(value)) ?? options.entries; i += 1
    case "--dir": options.dir = value; options.dirGiven = true; i += 1
    case "--json": options.json = true
    case "--file-format": options.fileFormat = UInt32(value) ?? options.fileFormat; i += 1
    case "--shifts": options.shifts = value.split(separator: ",").compactMap { UInt32($0) }; i += 1
    case "--probes": options.probes = Int(value) ?? options.probes; i += 1
    case "--keep": options.keep = UInt32(value); i += 1
    case "--range":
        let ends = value.split(separator: "-").map { UInt64($0.drop { $0 == "+" }) }
        guard ends.count == 2, let first = ends[0], let last = ends[1], first <= last else {
            warn("--range wants FIRST-LAST, E.164 digits"); exit(2)
        }
        options.range = (first, last); i += 1
    case "--exclude": options.exclude = value; i += 1
    default: print(usage, terminator: ""); exit(2)
    }
    i += 1
}
switch mode {
case "directory": directoryBenchmark(options)
case "lookups": lookupsBenchmark(options)
case "compile": compileBenchmark(options)
case "blocks": blocksBenchmark(options)
case "generate": generateCSV(options)
default: print(usage, terminator: ""); exit(2)
}
