import Answering
import SystemCalls

extension WallTime {
    /// The wall clock now. Workers read it once per batch of messages.
    static func now() -> WallTime {
        let (seconds, nanoseconds) = wallClock()
        return WallTime(seconds: seconds, nanoseconds: nanoseconds)
    }
}
