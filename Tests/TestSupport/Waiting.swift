import Glibc

public func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes.
@discardableResult
public func eventually(timeout: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = monotonicSeconds() + timeout
    repeat {
        if try condition() { return true }
        usleep(20_000)
    } while monotonicSeconds() < deadline
    return try condition()
}
