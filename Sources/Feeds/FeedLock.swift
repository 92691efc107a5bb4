import Glibc
import SystemCalls

/// One `lookupd update` at a time per state directory: the timer and an operator running
/// it by hand must not interleave renames. Held until the process exits or `release()`.
final class FeedLock {
    private var fd: FileDescriptor?

    init(folder: String) throws(FeedError) {
        let path = folder + "/update.lock"
        // Read-only is enough for flock, and works when root created the file before the
        // service user first ran.
        let opened: FileDescriptor
        do { opened = try FileDescriptor.open(path, O_RDONLY | O_CREAT, permissions: 0o640) } catch {
            throw FeedError("cannot open \(path): \(error)")
        }
        do { try opened.lockExclusively(wait: false) } catch {
            opened.close()
            if error == .wouldBlock { throw FeedError("another lookupd update is running (it holds \(path))") }
            throw FeedError("cannot lock \(path): \(error)")
        }
        fd = opened
    }

    func release() {
        fd?.close()
        fd = nil
    }

    deinit { release() }
}
