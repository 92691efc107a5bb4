import Configuration
import Identity
import Screening

/// Everything a worker needs to answer requests, loaded and verified as one unit and swapped
/// in whole on reload: the configuration it came from, the screening lists and the answer
/// policy compiled from both. Immutable: workers share it without locks, and one that still
/// holds the previous set finishes on it. Loaded by the daemon (`ServingSetLoader`).
///
/// Threading: immutable; `Sendable`.
public final class ServingSet: Sendable {
    public let generation: UInt64
    public let config: LookupdConfig
    public let screening: ScreeningSet
    public let policy: AnswerPolicy

    public init(generation: UInt64, config: LookupdConfig, screening: ScreeningSet, zone: ZoneRules) {
        self.generation = generation
        self.config = config
        self.screening = screening
        self.policy = AnswerPolicy(config: config, zone: zone)
    }

    /// The same configuration and policy with other screening (a journal update, a
    /// compacted directory file), as generation `generation`.
    public func with(screening: ScreeningSet, generation: UInt64) -> ServingSet {
        ServingSet(generation: generation, config: config, screening: screening, policy: policy)
    }

    private init(generation: UInt64, config: LookupdConfig, screening: ScreeningSet, policy: AnswerPolicy) {
        self.generation = generation
        self.config = config
        self.screening = screening
        self.policy = policy
    }

    /// The decision for a caller given as text (the HTTP lookup), read by SIP's
    /// `SIPIdentityReader` as a call's From is: the same screening and time zone as a call,
    /// no SIP message, nothing counted.
    public func lookup(caller: CallerIdentity, callee: UnsafeRawBufferPointer, now: WallTime) -> Decision {
        let time = screening.usesTime ? policy.zone.localTime(utc: now.seconds) : nil
        return screening.decide(caller: caller, context: CallContext(callee: callee, verstat: Verstat(caller.verstat), time: time))
    }
}

/// A reading of the wall clock, taken by the I/O side (once per batch of messages): for
/// `active=` windows and the decision log's time.
///
/// Threading: a plain value; `Sendable`.
public struct WallTime: Sendable, Hashable {
    /// Seconds since the epoch (UTC).
    public var seconds: Int64
    public var nanoseconds: Int32

    public init(seconds: Int64, nanoseconds: Int32 = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }
}
