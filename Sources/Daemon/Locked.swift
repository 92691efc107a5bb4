import SystemCalls

/// The daemon's shared values use the system-call layer's pthread-mutex box.
typealias Locked = SystemCalls.Locked
