import Foundation
import XCTest

/// The XCTest executable running now (`swift test` starts
/// .build/<config>/lookupdPackageTests.xctest), for tests that run some of
/// its own tests in a child process.
public let testBundleExecutable: String? = {
    var candidates = Bundle.allBundles.map(\.bundlePath).filter { $0.hasSuffix(".xctest") }
    candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path)
    return candidates.first { $0.hasSuffix(".xctest") && FileManager.default.isExecutableFile(atPath: $0) }
}()

/// Starts the tests `filter` names ("Module.Class" or "Module.Class/testName")
/// of this very bundle in a child process, with `environment` added.
public func startTestRun(_ filter: String, folder: String, environment: [String: String]) throws -> ChildProcess {
    guard let bundle = testBundleExecutable else {
        throw TestSupportError.failed("cannot find the running test bundle (argv[0] is \(CommandLine.arguments[0]))")
    }
    return try ChildProcess(executable: bundle, arguments: [filter], folder: folder, name: "inner-tests", environment: environment)
}

/// True under scripts/sanitize, which sets LOOKUPD_SANITIZER.
public var underSanitizer: Bool { ProcessInfo.processInfo.environment["LOOKUPD_SANITIZER"] != nil }

/// Skips a test in the sanitizer passes. For tests that are slow and whose
/// property (crash consistency, packaging, a peer's failover timing) does not
/// depend on memory safety or races: the code they drive is run under the
/// sanitizers by faster tests, and CI's hour is spent three times.
public func skipUnderSanitizer(_ why: String) throws {
    if underSanitizer { throw XCTSkip("plain pass only: \(why)") }
}
