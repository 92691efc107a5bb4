import Foundation

/// The repository and its test fixtures, found from this file's path (no
/// resource bundles).
public enum Repository {
    public static let root: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()   // TestSupport
        .deletingLastPathComponent()   // Tests
        .deletingLastPathComponent()

    public static func path(_ relative: String) -> String { root.appendingPathComponent(relative).path }
}

/// Tests/Fixtures.
public let fixturesDirectory: URL = Repository.root.appendingPathComponent("Tests/Fixtures")
public let tortureDirectory = fixturesDirectory.appendingPathComponent("sip-torture")
public let scenarioDirectory = fixturesDirectory.appendingPathComponent("sipp")

/// An executable this package builds: $`variable` when set, else next to the
/// test bundle (`.build/<config>/NAME`, built with the tests).
public struct BuiltProgram: Sendable {
    public let name: String
    /// Every place looked at, for the error message.
    public let candidates: [String]
    public let path: String?

    public init(_ name: String, variable: String) {
        self.name = name
        if let explicit = ProcessInfo.processInfo.environment[variable], !explicit.isEmpty {
            candidates = [explicit]
        } else {
            var folders: [String] = []
            // The test bundle sits next to the products: .build/debug/lookupdPackageTests.xctest
            // (an executable on Linux, a bundle folder on macOS).
            for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
                folders.append(URL(fileURLWithPath: bundle.bundlePath).deletingLastPathComponent().path)
            }
            var url = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
            let argv0Folder = url.deletingLastPathComponent().path
            while url.path != "/" {
                if url.pathExtension == "xctest" { folders.append(url.deletingLastPathComponent().path) }
                url = url.deletingLastPathComponent()
            }
            folders.append(argv0Folder)
            if let main = Bundle.main.executableURL { folders.append(main.deletingLastPathComponent().path) }
            var seen = Set<String>()
            candidates = folders.filter { seen.insert($0).inserted }.map { $0 + "/" + name }
        }
        path = candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Why it was not found, and what to do.
    public var missing: String {
        "the \(name) executable was not found; looked at: \(candidates.joined(separator: ", ")). "
            + "Build it (swift build --build-tests, with the same --scratch-path) or set its variable."
    }
}

/// The `lookupd` executable ($LOOKUPD_BINARY, else next to the test bundle).
public let lookupdProgram = BuiltProgram("lookupd", variable: "LOOKUPD_BINARY")
/// The fuzz targets' replayer ($LOOKUPD_FUZZ_BINARY, else next to the test bundle).
public let fuzzProgram = BuiltProgram("lookupd-fuzz", variable: "LOOKUPD_FUZZ_BINARY")

/// Where the tests look for `lookupd` (the name every test target used).
public enum LookupdBinary {
    public static var candidates: [String] { lookupdProgram.candidates }
    public static var path: String? { lookupdProgram.path }
}

/// A program from the system (Debian packages scripts/install-deps installs):
/// $`variable` when set, else the first of `folders` and then PATH holding it.
public func installedProgram(_ name: String, variable: String, folders: [String] = ["/usr/bin", "/usr/local/bin", "/usr/sbin"]) -> String? {
    if let explicit = ProcessInfo.processInfo.environment[variable], !explicit.isEmpty {
        return FileManager.default.isExecutableFile(atPath: explicit) ? explicit : nil
    }
    let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
    return (folders + path).map { $0 + "/" + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
}
