import Foundation
import XCTest
@testable import Configuration
@testable import Loading
@testable import Directory
@testable import Screening

/// The replicated layer (changes from etcd, docs/CLUSTER.md) laid over a
/// directory's journal and file: its entries win, its removals hide what
/// the layers below say, a value this lookupd refused counts as absent,
/// and a decision names the etcd revision that made it.
final class ReplicatedLayerTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder("lookupd-replicated") }
    override func tearDown() { folder.cleanup() }

    func key(_ text: String) -> UInt64 { JournalRecord.key(pattern(text)) }

    func summary(_ set: ScreeningSet, _ identity: String) -> String {
        let d = set.decide(identity: identity)
        return [d.verdict.rawValue, d.label.map { set.label($0) } ?? "-", d.match?.description ?? "-",
                d.journalRecord.map { "#\($0)" } ?? d.replicatedRevision.map { "r\($0)" } ?? "-"].joined(separator: " | ")
    }

    func testPrecedenceOverJournalAndFile() throws {
        try compileDirectory("""
        number,action,label
        +8613800138000,block,Fraud
        +8613800138001,identify,Bank
        +86170*,block,Range
        +861705*,identify,Carrier
        """, named: "main.lkd", in: folder)
        let path = folder.file("main.lkd")
        _ = try DirectoryUpdates.add(pattern("+8613800138002"), blocked: true, label: Array("Journal".utf8), directory: path)   // #1
        _ = try DirectoryUpdates.add(pattern("+8613800138003"), blocked: false, label: Array("Journal 3".utf8), directory: path) // #2
        var layer = ReplicaState()
        func put(_ text: String, _ revision: UInt64, _ action: ReplicaAction) {
            layer.apply(ReplicaChange(key: key(text), revision: revision, entry: ReplicaEntry(revision: revision, action: action)))
        }
        put("+8613800138001", 10, .add(blocked: true, label: Array("Bank?".utf8)))   // replaces the file's entry
        put("+8613800138000", 11, .remove)                                            // hides the file's exact entry
        put("+8613800138002", 12, .add(blocked: false, label: Array("Etcd".utf8)))    // replaces the journal's
        put("+8613800138003", 13, .refused(value: Array(#"{"action":"allow"}"#.utf8)))  // as if absent: the journal decides
        put("+861705*", 14, .remove)                                                  // hides a prefix rule: the shorter one decides
        put("+8617012*", 15, .add(blocked: false, label: Array("Etcd Range".utf8)))   // a prefix length only the layer has
        put("+8613900000000", 16, .add(blocked: true, label: nil))
        let base = try loadDirectory(path)
        let set = base.replacing(directory: 0, with: base.directories[0].with(replicated: layer))

        XCTAssertEqual(summary(set, "+8613800138001"), "blocked | Bank? | +8613800138001 | r10")
        XCTAssertEqual(summary(set, "+8613800138000"), "unknown | - | - | -")
        XCTAssertEqual(summary(set, "+8613800138002"), "identified | Etcd | +8613800138002 | r12")
        XCTAssertEqual(summary(set, "+8613800138003"), "identified | Journal 3 | +8613800138003 | #2")
        XCTAssertEqual(summary(set, "+8617055551234"), "blocked | Range | +86170* | -")
        XCTAssertEqual(summary(set, "+8617012345678"), "identified | Etcd Range | +8617012* | r15")
        XCTAssertEqual(summary(set, "+8613900000000"), "blocked | - | +8613900000000 | r16")
        XCTAssertEqual(summary(base, "+8613800138000"), "blocked | Fraud | +8613800138000 | -", "the set without the layer is unchanged")

        // A removal in the layer of an exact number under a layer prefix rule: the rule decides.
        put("+8617012000000", 17, .remove)
        let later = base.replacing(directory: 0, with: base.directories[0].with(replicated: layer))
        XCTAssertEqual(summary(later, "+8617012000000"), "identified | Etcd Range | +8617012* | r15")
        // The key deleted in etcd: back to what the journal and file say.
        layer.apply(ReplicaChange(key: key("+8613800138000"), revision: 18, entry: nil))
        let deleted = base.replacing(directory: 0, with: base.directories[0].with(replicated: layer))
        XCTAssertEqual(summary(deleted, "+8613800138000"), "blocked | Fraud | +8613800138000 | -")
    }

    /// Random layers against a plain model of the precedence.
    func testRandomLayersAgreeWithAModel() throws {
        var rng = SeededRandom(seed: 2121)
        var lines = ["number,action,label"]
        for i in 0..<40 { lines.append("+86138000\(String(format: "%05d", i * 7)),\(i % 3 == 0 ? "identify" : "block"),F\(i % 4)") }
        lines += ["+86170*,block,Range", "+861380000*,identify,Wide"]
        try compileDirectory(lines.joined(separator: "\n") + "\n", named: "r.lkd", in: folder)
        let path = folder.file("r.lkd")
        let patterns = (0..<300).map { "+86138000\(String(format: "%05d", $0))" } + ["+86170*", "+861380000*", "+8613800001*", "+86138*", "+8617012*"]
        enum Say: Equatable { case add(Bool, String?), removed }
        var journalModel: [String: Say] = [:]
        for _ in 0..<80 {
            let text = patterns.randomElement(using: &rng)!
            if Int.random(in: 0..<3, using: &rng) == 0 {
                if (try? DirectoryUpdates.remove(pattern(text), directory: path)) != nil { journalModel[text] = .removed }
            } else {
                let label: String? = Bool.random(using: &rng) ? "J\(Int.random(in: 0..<4, using: &rng))" : nil
                let blocked = label == nil || Bool.random(using: &rng)
                _ = try DirectoryUpdates.add(pattern(text), blocked: blocked, label: label.map { Array($0.utf8) }, directory: path)
                journalModel[text] = .add(blocked, label)
            }
        }
        var layer = ReplicaState()
        var layerModel: [String: Say?] = [:]   // nil value: refused
        var revision: UInt64 = 100
        for _ in 0..<3000 {
            let text = patterns.randomElement(using: &rng)!
            revision += 1
            let roll = Int.random(in: 0..<10, using: &rng)
            let action: ReplicaAction?
            switch roll {
            case 0: action = nil
            case 1: action = .refused(value: [])
            case 2, 3: action = .remove
            default:
                let label: [UInt8]? = roll > 6 ? Array("E\(roll)".utf8) : nil
                action = .add(blocked: label == nil || roll % 2 == 0, label: label)
            }
            layer.apply(ReplicaChange(key: key(text), revision: revision, entry: action.map { ReplicaEntry(revision: revision, action: $0) }))
            switch action {
            case nil: layerModel.removeValue(forKey: text)
            case .refused?: layerModel[text] = .some(nil)
            case .remove?: layerModel[text] = .some(.removed)
            case .add(let b, let l, _)?: layerModel[text] = .some(.add(b, l.map { String(decoding: $0, as: UTF8.self) }))
            }
        }
        let base = try loadDirectory(path)
        let file = base.directories[0].file
        let set = base.replacing(directory: 0, with: base.directories[0].with(replicated: layer))

        func layered(_ text: String) -> Say? {
            if let entry = layerModel[text], let say = entry { return say }
            if let say = journalModel[text] { return say }
            guard let stored = try! file.storedEntry(pattern(text)) else { return nil }
            return .add(stored.blocked, stored.label.map { String(decoding: file.labelBytes($0), as: UTF8.self) })
        }
        func expected(_ number: String) -> String {
            if case .add(let b, let l)? = layered(number) { return "\(b ? "blocked" : "identified")|\(l ?? "-")|\(number)" }
            let digits = Array(number.dropFirst())
            for length in stride(from: digits.count, through: 1, by: -1) {
                let rule = "+" + String(digits.prefix(length)) + "*"
                if case .add(let b, let l)? = layered(rule) { return "\(b ? "blocked" : "identified")|\(l ?? "-")|\(rule)" }
            }
            return "unknown|-|-"
        }
        var mismatches: [String] = []
        for i in 0..<320 {
            let number = "+86138000\(String(format: "%05d", i))"
            let d = set.decide(identity: number)
            let got = "\(d.verdict.rawValue)|\(d.label.map { set.label($0) } ?? "-")|\(d.match?.description ?? "-")"
            if got != expected(number) { mismatches.append("\(number): \(got), model \(expected(number))") }
        }
        XCTAssertEqual(mismatches, [])
    }

    /// `lookupd query` reads the layer the daemon keeps in its state directory.
    func testLoaderReadsTheLayerFromTheStateDirectory() throws {
        try compileDirectory("number,action,label\n+8613800138000,block,Fraud\n", named: "main.lkd", in: folder)
        var config = LookupdConfig()
        config.directories = [DirectoryConfig(path: folder.file("main.lkd"), name: "main")]
        config.stateDirectory = folder.file("state")
        config.replication = ReplicationConfig(endpoints: ["http://127.0.0.1:1"], node: "a")
        let missing = try ScreeningLoader.load(config, verify: true)
        XCTAssertTrue(missing.warnings.contains { $0.description.contains("no replicated layer yet") }, "\(missing.warnings)")

        try FileManager.default.createDirectory(atPath: ReplicaFormat.folder(stateDirectory: config.stateDirectory), withIntermediateDirectories: true)
        let store = ReplicaStore(path: ReplicaFormat.path(stateDirectory: config.stateDirectory, directory: "main"))
        try store.replace(entries: [key("+8613800138000"): ReplicaEntry(revision: 41, action: .add(blocked: false, label: Array("Cleared".utf8)))],
                          clusterID: 5, revision: 44)
        let loaded = try ScreeningLoader.load(config, verify: true)
        XCTAssertEqual(loaded.warnings, [])
        XCTAssertEqual(summary(loaded.set, "+8613800138000"), "identified | Cleared | +8613800138000 | r41")
        config.replication = nil
        XCTAssertEqual(summary(try ScreeningLoader.load(config, verify: true).set, "+8613800138000"), "blocked | Fraud | +8613800138000 | -",
                       "without replicate the layer is not read")
    }
}
