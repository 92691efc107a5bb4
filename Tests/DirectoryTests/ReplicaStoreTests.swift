import Foundation
import XCTest
@testable import Directory

/// The replicated layer's file (docs/FORMAT.md, "The replicated layer"):
/// batches count only with their checkpoint, a crash mid-batch leaves the
/// layer as of the checkpoint before, replacement is whole, and the state
/// in memory agrees with a plain model through both of its tiers.
final class ReplicaStoreTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder("lookupd-replica") }
    override func tearDown() { folder.cleanup() }

    func key(_ n: UInt64) -> UInt64 { 8613000000000 + n }
    func block(_ label: String?, _ revision: UInt64, origin: String = "a") -> ReplicaEntry {
        ReplicaEntry(revision: revision, action: .add(blocked: true, label: label.map { Array($0.utf8) }), time: 1_700_000_000_123, origin: Array(origin.utf8))
    }

    func testBatchesReplacementAndReadBack() throws {
        let path = folder.file("main.lkr")
        let store = ReplicaStore(path: path)
        try store.open()
        XCTAssertFalse(store.exists, "no file: the caller fetches a snapshot")
        try store.replace(entries: [key(1): block("One", 5)], clusterID: 77, revision: 9)
        XCTAssertTrue(store.exists)
        try store.append([ReplicaChange(key: key(2), revision: 10, entry: block(nil, 10)),
                          ReplicaChange(key: key(1), revision: 11, entry: nil)], through: 11)
        XCTAssertFalse(store.unsynced)
        try store.append([ReplicaChange(key: key(3), revision: 12, entry: ReplicaEntry(revision: 12, action: .remove)),
                          ReplicaChange(key: key(4), revision: 12, entry: ReplicaEntry(revision: 12, action: .refused(value: Array("{\"action\":\"allow\"}".utf8))))],
                         through: 14, sync: false)
        XCTAssertTrue(store.unsynced, "written, in force, not synced yet")
        XCTAssertEqual(store.state.revision, 14)
        try store.sync()
        XCTAssertFalse(store.unsynced)
        let read = try XCTUnwrap(ReplicaStore.read(path: path))
        XCTAssertNil(read.problem)
        XCTAssertEqual(read.state.revision, 14)
        XCTAssertEqual(read.state.clusterID, 77)
        XCTAssertEqual(read.state.count, 3)
        XCTAssertNil(read.state[key(1)], "deleted in etcd")
        XCTAssertEqual(read.state[key(2)], block(nil, 10))
        XCTAssertEqual(read.state[key(3)]?.action, .remove)
        XCTAssertEqual(read.state[key(4)]?.action, .refused(value: Array("{\"action\":\"allow\"}".utf8)), "kept for a later version")
        XCTAssertEqual(read.state.entries, store.state.entries)

        // Replacing keeps nothing of the old layer.
        try store.replace(entries: [key(9): block("Nine", 20)], clusterID: 77, revision: 30)
        let replaced = try XCTUnwrap(ReplicaStore.read(path: path))
        XCTAssertEqual(replaced.state.revision, 30)
        XCTAssertEqual(Set(replaced.state.entries.keys), [key(9)])
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix(".") }
        XCTAssertEqual(leftovers, [], "no temporary file left behind")
    }

    /// A batch cut anywhere (a crash mid-append) is not applied, and the
    /// writer that opens the file next cuts it off and appends after the
    /// checkpoint before.
    func testTornBatchIsIgnoredAtEveryCut() throws {
        let path = folder.file("main.lkr")
        let store = ReplicaStore(path: path)
        try store.open()
        try store.replace(entries: [key(1): block("One", 3)], clusterID: 1, revision: 3)
        let committed = try Data(contentsOf: URL(fileURLWithPath: path))
        try store.append([ReplicaChange(key: key(2), revision: 4, entry: block("Two", 4)),
                          ReplicaChange(key: key(3), revision: 5, entry: block("Three", 5))], through: 5)
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        for cut in committed.count..<whole.count {
            try whole.prefix(cut).write(to: URL(fileURLWithPath: path))
            let read = try XCTUnwrap(ReplicaStore.read(path: path))
            XCTAssertEqual(read.state.revision, 3, "cut at \(cut)")
            XCTAssertEqual(Set(read.state.entries.keys), [key(1)], "cut at \(cut)")
            XCTAssertEqual(read.problem == nil, cut == committed.count, "cut at \(cut): \(read.problem ?? "-")")
        }
        let writer = ReplicaStore(path: path)
        try writer.open()
        XCTAssertNotNil(writer.problem)
        try writer.append([ReplicaChange(key: key(7), revision: 6, entry: block("Seven", 6))], through: 6)
        let read = try XCTUnwrap(ReplicaStore.read(path: path))
        XCTAssertNil(read.problem, "the torn batch was cut off before the append")
        XCTAssertEqual(Set(read.state.entries.keys), [key(1), key(7)])
    }

    /// A flipped byte in a committed batch: the layer is as of the
    /// checkpoint before the damage (stale, never wrong).
    func testDamageStopsAtTheLastGoodCheckpoint() throws {
        let path = folder.file("main.lkr")
        let store = ReplicaStore(path: path)
        try store.open()
        try store.replace(entries: [:], clusterID: 1, revision: 3)
        try store.append([ReplicaChange(key: key(1), revision: 4, entry: block("One", 4))], through: 4)
        let good = try Data(contentsOf: URL(fileURLWithPath: path)).count
        try store.append([ReplicaChange(key: key(2), revision: 5, entry: block("Two", 5))], through: 5)
        try store.append([ReplicaChange(key: key(3), revision: 6, entry: block("Three", 6))], through: 6)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes[good + 10] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: path))
        let read = try XCTUnwrap(ReplicaStore.read(path: path))
        XCTAssertEqual(read.state.revision, 4)
        XCTAssertEqual(Set(read.state.entries.keys), [key(1)])
        XCTAssertTrue(read.problem?.contains("checksum") ?? false, read.problem ?? "-")

        // A damaged header: not a layer this lookupd can use at all.
        bytes[20] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try ReplicaStore.read(path: path))
        let writer = ReplicaStore(path: path)
        try writer.open()
        XCTAssertFalse(writer.exists, "an unusable layer is fetched again")
        XCTAssertNotNil(writer.problem)
    }

    /// Records are rewritten once superseded ones dominate the file.
    func testSupersededRecordsAreRewrittenAway() throws {
        let path = folder.file("main.lkr")
        let store = ReplicaStore(path: path)
        try store.open()
        try store.replace(entries: [:], clusterID: 1, revision: 1)
        var revision: UInt64 = 1
        for _ in 0..<600 {
            var batch: [ReplicaChange] = []
            for _ in 0..<10 {
                revision += 1
                batch.append(ReplicaChange(key: key(revision % 10), revision: revision, entry: block("L\(revision)", revision)))
            }
            try store.append(batch, through: revision)
        }
        XCTAssertEqual(revision, 6001)
        XCTAssertLessThan(store.records, 4200, "rewritten at least once")
        let read = try XCTUnwrap(ReplicaStore.read(path: path))
        XCTAssertEqual(read.state.revision, 6001)
        XCTAssertEqual(read.state.count, 10)
        XCTAssertEqual(read.state[key(1)], block("L6001", 6001))
    }

    /// The two tiers agree with one dictionary through random changes,
    /// replays of older revisions included.
    func testStateAgreesWithAModel() {
        var generator = SeededRandom(seed: 21)
        var state = ReplicaState()
        var model: [UInt64: ReplicaEntry] = [:]
        var revision: UInt64 = 0
        for step in 0..<40_000 {
            revision += 1
            let k = UInt64.random(in: 0..<3000, using: &generator)
            let isPrefix = k % 7 == 0
            let key = isPrefix ? (UInt64(5) << 56 | (86170 + k % 9)) : self.key(k)
            let entry: ReplicaEntry? = k % 5 == 0 ? nil : block("L\(step)", revision)
            let change = ReplicaChange(key: key, revision: revision, entry: entry)
            state.apply(change)
            if let entry { model[key] = entry } else { model[key] = nil }
            if step % 3 == 0 { state.revision = revision }
            // A replay of something older never undoes a newer change.
            if step % 11 == 0 { state.apply(ReplicaChange(key: key, revision: state.revision, entry: block("old", state.revision))) }
        }
        XCTAssertEqual(state.count, model.count)
        XCTAssertEqual(state.entries, model)
        for (key, entry) in model { XCTAssertEqual(state[key], entry) }
        XCTAssertNotEqual(state.prefixMask & (1 << 5), 0)
    }
}
