import Glibc
import Screening
import Synchronization

/// The current time in the configured `time-zone`, for `active=` windows.
///
/// glibc's `localtime_r` takes a lock and may read files, so it is not
/// called per request: the zone's UTC offset is cached for the current
/// minute (zones change offset only on whole minutes), and a call costs
/// one `clock_gettime` (vDSO) and one atomic load. A refresh by two threads
/// at once is harmless: each stores a consistent minute and offset.
///
/// The zone is the process's local zone (`TZ`, then `tzset`), set by
/// `activate` on the loading thread before a set using it serves.
public final class ZoneClock: Sendable {
    public let zone: String?
    /// The minute (UTC seconds / 60) the cached offset was computed for, in
    /// the high 40 bits, and the offset + 2^23 seconds in the low 24: one
    /// word, so a reader never pairs a minute with another minute's offset.
    /// 0: nothing cached.
    private let cache = Atomic<UInt64>(0)

    public init(zone: String?) {
        self.zone = zone
    }

    /// Makes `zone` the process's local time zone; nil restores the zone
    /// the process started with.
    public static func activate(_ zone: String?) {
        let original = startupZone
        if let zone {
            setenv("TZ", zone, 1)
        } else if let startup = original.zone {
            setenv("TZ", startup, 1)
        } else {
            unsetenv("TZ")
        }
        tzset()
    }

    private struct StartupZone: Sendable { let zone: String? }
    private static let startupZone: StartupZone = {
        guard let tz = getenv("TZ") else { return StartupZone(zone: nil) }
        return StartupZone(zone: String(cString: tz))
    }()

    /// Now, in the zone.
    public func now() -> LocalTime {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return localTime(utc: Int64(ts.tv_sec))
    }

    /// `utc` (seconds since the epoch) in the zone.
    public func localTime(utc: Int64) -> LocalTime {
        let minute = utc >= 0 ? utc / 60 : -1
        let cached = cache.load(ordering: .relaxed)
        if minute >= 0, cached != 0, Int64(cached >> 24) == minute + 1 {
            return LocalTime(localSeconds: utc + Int64(cached & 0xFF_FFFF) - 0x80_0000)
        }
        var t = time_t(utc)
        var parts = tm()
        localtime_r(&t, &parts)
        let seconds = Int64(parts.tm_gmtoff)
        if minute >= 0, abs(seconds) < 0x80_0000 {
            cache.store(UInt64(minute + 1) << 24 | UInt64(seconds + 0x80_0000), ordering: .relaxed)
        }
        return LocalTime(localSeconds: utc + seconds)
    }
}
