import Addresses
import SIP

/// What one worker knows about its way to the upstream, for proxy decisions. The daemon's
/// `ProxyForwarder` owns the sockets and keeps this up to date; `Answerer` only reads it.
///
/// A class, so that handing it to every `answer` copies nothing.
///
/// Threading: its worker's thread only.
public final class ProxyContext {
    /// The Via pushed on requests sent to the upstream (the address they leave from).
    public let upstreamVia: SIPViaAddress
    /// Addresses a Route may name to mean lookupd (listen addresses and `upstreamVia`).
    public let ownAddresses: [SIPViaAddress]
    public let ownHosts: [String]
    /// The same in every worker (a CANCEL may reach another worker than its INVITE).
    public let branchKey: UInt64
    /// Responses are taken from this address only (over UDP, from its port only): anyone else
    /// could otherwise have lookupd send a response of their making to a third party.
    public let upstreamHost: IPAddress
    public let upstreamPort: UInt16
    /// The key of the caller's From carried in our Via (`label-to-caller = no`): the same in
    /// every worker of the daemon.
    public let callerFromKey: SIPCallerFromKey
    /// False while the upstream is known to be down: requests get 503 instead of silence.
    public var upstreamAvailable: Bool

    public init(upstreamVia: SIPViaAddress, ownAddresses: [SIPViaAddress], ownHosts: [String], branchKey: UInt64,
                upstreamHost: IPAddress, upstreamPort: UInt16, upstreamAvailable: Bool, callerFromKey: SIPCallerFromKey) {
        self.callerFromKey = callerFromKey
        self.upstreamVia = upstreamVia
        self.ownAddresses = ownAddresses
        self.ownHosts = ownHosts
        self.branchKey = branchKey
        self.upstreamHost = upstreamHost
        self.upstreamPort = upstreamPort
        self.upstreamAvailable = upstreamAvailable
    }
}
