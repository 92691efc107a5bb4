import Glibc

/// One `lookupd update` at a time per state directory: the timer and an operator running
/// it by hand must not interleave renames. Held until the process exits or `release()`.
final class FeedLock {
    private var fd: Int32

    init(folder: String) throws(FeedError) {
        let path = folder + "/update.lock"
        // Read-only is enough for flock, and works when root created the file before the
        // service user first ran.
        fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0o640)
        guard fd >= 0 else { throw FeedError("cannot open \(path): \(FileOperations.errorText(errno))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            close(fd)
            fd = -1
            if code == EWOULDBLOCK { throw FeedError("another lookupd update is running (it holds \(path))") }
            throw FeedError("cannot lock \(path): \(FileOperations.errorText(code))")
        }
    }

    func release() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    deinit { release() }
}
