import Glibc

// The clocks lookupd reads. clock_gettime goes through the vDSO (no system call, no lock), so
// any thread may call these per request.

/// Seconds on the monotonic clock: for intervals and timeouts, immune to clock changes.
public func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Nanoseconds on the monotonic clock, for latency histograms.
public func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// Seconds since the epoch (UTC) on the wall clock: what time windows are judged by.
public func wallClockSeconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec)
}

/// The wall clock to the nanosecond: seconds since the epoch (UTC) and the nanoseconds into it.
public func wallClock() -> (seconds: Int64, nanoseconds: Int32) {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return (Int64(ts.tv_sec), Int32(ts.tv_nsec))
}
