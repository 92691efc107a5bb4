/// `redress`: where a caller whose call a 603+ answer blocked asks for redress
/// (ATIS-1000099). At least one of url, tel and email.
public struct Redress: Equatable, Sendable {
    /// RFC 8606's `location` of the Reason header: which network released the call, as the
    /// caller's side sees it.
    public enum Location: String, Sendable, CaseIterable {
        /// Public network serving the local user (the caller's own carrier).
        case localNetwork = "LN"
        /// Transit network.
        case transit = "TN"
        /// Private network serving the local user.
        case localPrivate = "LPN"
        /// Private network serving the remote user (the callee's PBX).
        case remotePrivate = "RPN"
        /// Public network serving the remote user (the callee's carrier).
        case remoteNetwork = "RLN"
    }

    public var url: String?
    public var tel: String?
    public var email: String?
    public var location: Location

    public init(url: String? = nil, tel: String? = nil, email: String? = nil, location: Location) {
        self.url = url
        self.tel = tel
        self.email = email
        self.location = location
    }
}

/// How rejections are worded beyond their status (issue 17): the 603+ redress, RFC 8688's
/// jCard on a 608, 433 for withheld callers, and whether the label goes back with a rejection.
public struct TreatmentConfig: Sendable {
    public var redress: Redress?
    /// `redress-jcard`: the https URL of the blocking party's jCard (RFC 8688 §3.2), sent as
    /// `Call-Info: <URL>;purpose=jwscard` on 608 answers.
    public var jcardURL: String?
    /// `anonymous-callers = reject 433`: withheld callers get 433 Anonymity Disallowed
    /// (RFC 5079) instead of the block response.
    public var anonymousRejection433 = false
    /// `label-to-caller`: whether lookupd's own rejections carry the label. Off by default: a
    /// rejection ends up with the caller, who would learn how he is labelled.
    public var labelToCaller = false
    /// `redress-q850`: a 603+ answer also carries `Reason: Q.850;cause=21` (Call Rejected).
    public var redressQ850 = false

    public init() {}
}
