import Foundation

/// Debian's python3 (scripts/install-deps installs it), else the first on PATH.
public let python3: String = installedProgram("python3", variable: "PYTHON3") ?? "/usr/bin/python3"

/// One request the feed server saw.
public struct ServedRequest {
    public var path: String
    public var status: Int
    public var ifNoneMatch: String?
    public var ifModifiedSince: String?
    public var bytes: Int
}

/// Tests/Fixtures/feeds/feed-server.py on 127.0.0.1, serving the files of
/// `root`; its output lands beside `root`. Stopped by PID.
public final class FeedServer {
    public let root: String
    public let child: ChildProcess
    public private(set) var port: UInt16 = 0
    private var publishCount = 0

    public init(root: String) throws {
        self.root = root
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let script = fixturesDirectory.appendingPathComponent("feeds/feed-server.py").path
        child = try ChildProcess(executable: python3, arguments: [script, root],
                                 folder: URL(fileURLWithPath: root).deletingLastPathComponent().path, name: "feed-server")
        var found: UInt16 = 0
        let child = child
        eventually(timeout: 15) {
            if let line = child.stdout.split(separator: "\n").first(where: { $0.hasPrefix("PORT ") }), let p = UInt16(line.dropFirst(5)) {
                found = p
                return true
            }
            return !child.isRunning
        }
        guard found != 0 else {
            child.stop(grace: 2)
            throw TestSupportError.failed("the feed server did not start (\(child.state)): \(child.stdout)\(child.stderr)")
        }
        port = found
    }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)/\(path)" }

    /// Writes a file the server serves; a new mtime each time (Last-Modified changes).
    @discardableResult
    public func publish(_ name: String, _ text: String) -> String { publish(name, Data(text.utf8)) }

    @discardableResult
    public func publish(_ name: String, _ data: Data) -> String {
        let path = root + "/" + name
        _ = FileManager.default.createFile(atPath: path, contents: data)
        // Whole-second Last-Modified: move the mtime forward so a republished file is newer.
        let bump = Date().addingTimeInterval(Double(publishCount))
        publishCount += 1
        try? FileManager.default.setAttributes([.modificationDate: bump], ofItemAtPath: path)
        return path
    }

    public var requests: [ServedRequest] {
        readText(root + "/requests.log").split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return ServedRequest(path: object["path"] as? String ?? "", status: object["status"] as? Int ?? 0,
                                 ifNoneMatch: object["if-none-match"] as? String, ifModifiedSince: object["if-modified-since"] as? String,
                                 bytes: object["bytes"] as? Int ?? 0)
        }
    }

    public func clearLog() { try? FileManager.default.removeItem(atPath: root + "/requests.log") }

    public func stop() { child.stop(grace: 5) }
}
