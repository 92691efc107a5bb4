import CIntrinsics
import Screening

/// Every event the daemon counts. Kamailio's rule: a counter for everything
/// that can go wrong, so an operator can see what was refused and why.
///
/// Threading: a plain value; `Sendable`.
public enum Counter: Int, CaseIterable, Sendable {
    // Requests by method and transport.
    case udpInvite, udpAck, udpCancel, udpBye, udpOptions, udpRegister, udpOther
    case tcpInvite, tcpAck, tcpCancel, tcpBye, tcpOptions, tcpRegister, tcpOther
    // Verdicts for initial INVITEs.
    case verdictBlocked, verdictIdentified, verdictContact, verdictUnknown, verdictAnonymous, verdictInvalid, verdictBypassed
    // Responses sent, by status code.
    case response200, response302, response400, response403, response404, response405, response416
    case response420, response481, response483, response501, response503, response505
    case response603, response607, response608, responseOther
    // Things refused or dropped.
    case malformedAnswered, malformedDropped, tooLarge, strayResponses, aclRejected, aclDropped
    case labelsRefused, responseTooLarge, sendErrors, cancelIgnored
    // TCP.
    case tcpAccepted, tcpRefused, tcpClosedIdle, tcpClosedSlow, tcpClosedUnread, tcpClosedInvalid, tcpKeepalives
    // Caller policies and time windows acting on a call (docs/POLICIES.md).
    case policyBypass, policyAnonymousLabel, policyAnonymousBlock, policyInvalidLabel, policyInvalidBlock
    case policyVerstatFailedLabel, policyVerstatFailedBlock, policyNoValidationLabel, policyNoValidationBlock
    case policyContactDistrusted, policyInactiveDirectory
    // Proxy mode (docs/SIP.md): what was relayed, and everything that went wrong on the way.
    case proxyForwardedRequests, proxyForwardedResponses, proxyResponseNotOurs, proxyResponseUnroutable
    case proxyResponseMalformed, proxyResponseUndeliverable, proxyRequestFromUpstream, proxyTooManyHops, proxyLoops
    case proxyUpstreamUnavailable, proxyUpstreamConnected, proxyUpstreamConnectFailed, proxyUpstreamClosed
    case proxyUpstreamSendErrors, proxyUpstreamUnreachable, proxyProbesSent, proxyProbesAnswered, proxyLocalACKs
    // Proxy mode: a request whose top Via could not carry its real source (refused with 400).
    case proxyUnroutableVia
    // A TCP connection from outside allow-from closed at accept (drop, or the pool for 403s full).
    case tcpRefusedACL
    // A UDP answer made smaller (its label left out of PAI, or out) to stay within the amplification bound.
    case responsesTrimmed
    // An INVITE back after lookupd's own 302 (its Request-URI carries lookupd's mark): 482, not screened again.
    case redirectLoops
    // A lookup a directory had no say in: its bytes failed their check or its file changed in place.
    case directoryDamaged
    // The UDP receive path's system calls, for the kernel's share of a request (issue 20 item 4):
    // recvmmsg calls (an empty one included), the datagrams they returned, sendmmsg calls.
    case udpReceiveCalls, udpDatagramsReceived, udpSendCalls
    // A worker's epoll_wait returns that reported a ready descriptor: its wake-ups (issue 20 item 1).
    case workerWakeups

    public static let methodOffset = 7

    /// Prometheus name and labels for the exposition text.
    public var metric: (name: String, labels: String) {
        switch self {
        case .udpInvite: return ("lookupd_requests_total", "method=\"INVITE\",transport=\"udp\"")
        case .udpAck: return ("lookupd_requests_total", "method=\"ACK\",transport=\"udp\"")
        case .udpCancel: return ("lookupd_requests_total", "method=\"CANCEL\",transport=\"udp\"")
        case .udpBye: return ("lookupd_requests_total", "method=\"BYE\",transport=\"udp\"")
        case .udpOptions: return ("lookupd_requests_total", "method=\"OPTIONS\",transport=\"udp\"")
        case .udpRegister: return ("lookupd_requests_total", "method=\"REGISTER\",transport=\"udp\"")
        case .udpOther: return ("lookupd_requests_total", "method=\"other\",transport=\"udp\"")
        case .tcpInvite: return ("lookupd_requests_total", "method=\"INVITE\",transport=\"tcp\"")
        case .tcpAck: return ("lookupd_requests_total", "method=\"ACK\",transport=\"tcp\"")
        case .tcpCancel: return ("lookupd_requests_total", "method=\"CANCEL\",transport=\"tcp\"")
        case .tcpBye: return ("lookupd_requests_total", "method=\"BYE\",transport=\"tcp\"")
        case .tcpOptions: return ("lookupd_requests_total", "method=\"OPTIONS\",transport=\"tcp\"")
        case .tcpRegister: return ("lookupd_requests_total", "method=\"REGISTER\",transport=\"tcp\"")
        case .tcpOther: return ("lookupd_requests_total", "method=\"other\",transport=\"tcp\"")
        case .verdictBlocked: return ("lookupd_verdicts_total", "verdict=\"blocked\"")
        case .verdictIdentified: return ("lookupd_verdicts_total", "verdict=\"identified\"")
        case .verdictContact: return ("lookupd_verdicts_total", "verdict=\"contact\"")
        case .verdictUnknown: return ("lookupd_verdicts_total", "verdict=\"unknown\"")
        case .verdictAnonymous: return ("lookupd_verdicts_total", "verdict=\"anonymous\"")
        case .verdictInvalid: return ("lookupd_verdicts_total", "verdict=\"invalid\"")
        case .verdictBypassed: return ("lookupd_verdicts_total", "verdict=\"bypassed\"")
        case .response200: return ("lookupd_responses_total", "code=\"200\"")
        case .response302: return ("lookupd_responses_total", "code=\"302\"")
        case .response400: return ("lookupd_responses_total", "code=\"400\"")
        case .response403: return ("lookupd_responses_total", "code=\"403\"")
        case .response404: return ("lookupd_responses_total", "code=\"404\"")
        case .response405: return ("lookupd_responses_total", "code=\"405\"")
        case .response416: return ("lookupd_responses_total", "code=\"416\"")
        case .response420: return ("lookupd_responses_total", "code=\"420\"")
        case .response481: return ("lookupd_responses_total", "code=\"481\"")
        case .response483: return ("lookupd_responses_total", "code=\"483\"")
        case .response501: return ("lookupd_responses_total", "code=\"501\"")
        case .response503: return ("lookupd_responses_total", "code=\"503\"")
        case .response505: return ("lookupd_responses_total", "code=\"505\"")
        case .response603: return ("lookupd_responses_total", "code=\"603\"")
        case .response607: return ("lookupd_responses_total", "code=\"607\"")
        case .response608: return ("lookupd_responses_total", "code=\"608\"")
        case .responseOther: return ("lookupd_responses_total", "code=\"other\"")
        case .malformedAnswered: return ("lookupd_malformed_total", "action=\"400\"")
        case .malformedDropped: return ("lookupd_malformed_total", "action=\"dropped\"")
        case .tooLarge: return ("lookupd_refused_total", "reason=\"size\"")
        case .strayResponses: return ("lookupd_dropped_total", "reason=\"stray_response\"")
        case .aclRejected: return ("lookupd_refused_total", "reason=\"acl_403\"")
        case .aclDropped: return ("lookupd_refused_total", "reason=\"acl_dropped\"")
        case .labelsRefused: return ("lookupd_labels_refused_total", "")
        case .responseTooLarge: return ("lookupd_dropped_total", "reason=\"response_too_large\"")
        case .sendErrors: return ("lookupd_send_errors_total", "")
        case .cancelIgnored: return ("lookupd_dropped_total", "reason=\"cancel_ignored\"")
        case .tcpAccepted: return ("lookupd_tcp_connections_total", "event=\"accepted\"")
        case .tcpRefused: return ("lookupd_tcp_connections_total", "event=\"refused_limit\"")
        case .tcpClosedIdle: return ("lookupd_tcp_connections_total", "event=\"closed_idle\"")
        case .tcpClosedSlow: return ("lookupd_tcp_connections_total", "event=\"closed_slow_message\"")
        case .tcpClosedUnread: return ("lookupd_tcp_connections_total", "event=\"closed_unread_responses\"")
        case .tcpClosedInvalid: return ("lookupd_tcp_connections_total", "event=\"closed_invalid_framing\"")
        case .tcpKeepalives: return ("lookupd_tcp_keepalives_total", "")
        case .policyBypass: return ("lookupd_policy_total", "policy=\"bypass\",action=\"bypass\"")
        case .policyAnonymousLabel: return ("lookupd_policy_total", "policy=\"anonymous-callers\",action=\"label\"")
        case .policyAnonymousBlock: return ("lookupd_policy_total", "policy=\"anonymous-callers\",action=\"block\"")
        case .policyInvalidLabel: return ("lookupd_policy_total", "policy=\"invalid-callers\",action=\"label\"")
        case .policyInvalidBlock: return ("lookupd_policy_total", "policy=\"invalid-callers\",action=\"block\"")
        case .policyVerstatFailedLabel: return ("lookupd_policy_total", "policy=\"verstat-failed\",action=\"label\"")
        case .policyVerstatFailedBlock: return ("lookupd_policy_total", "policy=\"verstat-failed\",action=\"block\"")
        case .policyNoValidationLabel: return ("lookupd_policy_total", "policy=\"verstat-no-validation\",action=\"label\"")
        case .policyNoValidationBlock: return ("lookupd_policy_total", "policy=\"verstat-no-validation\",action=\"block\"")
        case .policyContactDistrusted: return ("lookupd_policy_total", "policy=\"verstat-failed-contacts\",action=\"ignore\"")
        case .policyInactiveDirectory: return ("lookupd_policy_total", "policy=\"active\",action=\"skip\"")
        case .proxyForwardedRequests: return ("lookupd_proxy_forwarded_total", "direction=\"upstream\"")
        case .proxyForwardedResponses: return ("lookupd_proxy_forwarded_total", "direction=\"downstream\"")
        case .proxyResponseNotOurs: return ("lookupd_proxy_dropped_total", "reason=\"via_not_ours\"")
        case .proxyResponseUnroutable: return ("lookupd_proxy_dropped_total", "reason=\"no_route\"")
        case .proxyResponseMalformed: return ("lookupd_proxy_dropped_total", "reason=\"malformed_response\"")
        case .proxyRequestFromUpstream: return ("lookupd_proxy_refused_total", "reason=\"from_upstream\"")
        case .proxyTooManyHops: return ("lookupd_proxy_refused_total", "reason=\"too_many_hops_483\"")
        case .proxyLoops: return ("lookupd_proxy_refused_total", "reason=\"loop_482\"")
        case .proxyUpstreamUnavailable: return ("lookupd_proxy_refused_total", "reason=\"upstream_down_503\"")
        case .proxyUpstreamConnected: return ("lookupd_proxy_upstream_total", "event=\"connected\"")
        case .proxyUpstreamConnectFailed: return ("lookupd_proxy_upstream_total", "event=\"connect_failed\"")
        case .proxyUpstreamClosed: return ("lookupd_proxy_upstream_total", "event=\"closed\"")
        case .proxyUpstreamSendErrors: return ("lookupd_proxy_upstream_total", "event=\"send_error\"")
        case .proxyUpstreamUnreachable: return ("lookupd_proxy_upstream_total", "event=\"unreachable\"")
        case .proxyProbesSent: return ("lookupd_proxy_upstream_total", "event=\"probe_sent\"")
        case .proxyProbesAnswered: return ("lookupd_proxy_upstream_total", "event=\"probe_answered\"")
        case .proxyLocalACKs: return ("lookupd_proxy_absorbed_total", "reason=\"ack_for_local_answer\"")
        case .proxyResponseUndeliverable: return ("lookupd_proxy_dropped_total", "reason=\"next_hop_unreachable\"")
        case .proxyUnroutableVia: return ("lookupd_proxy_refused_total", "reason=\"unroutable_via_400\"")
        case .tcpRefusedACL: return ("lookupd_tcp_connections_total", "event=\"refused_acl\"")
        case .responsesTrimmed: return ("lookupd_responses_trimmed_total", "")
        case .redirectLoops: return ("lookupd_refused_total", "reason=\"redirect_loop_482\"")
        case .directoryDamaged: return ("lookupd_directory_damaged_lookups_total", "")
        case .udpReceiveCalls: return ("lookupd_udp_receive_calls_total", "")
        case .udpDatagramsReceived: return ("lookupd_udp_datagrams_received_total", "")
        case .udpSendCalls: return ("lookupd_udp_send_calls_total", "")
        case .workerWakeups: return ("lookupd_worker_wakeups_total", "")
        }
    }

    public static func verdict(_ verdict: Verdict) -> Counter {
        switch verdict {
        case .blocked: return .verdictBlocked
        case .identified: return .verdictIdentified
        case .contact: return .verdictContact
        case .unknown: return .verdictUnknown
        case .anonymous: return .verdictAnonymous
        case .invalid: return .verdictInvalid
        case .bypassed: return .verdictBypassed
        }
    }

    public static func response(_ code: Int) -> Counter {
        switch code {
        case 200: return .response200
        case 302: return .response302
        case 400: return .response400
        case 403: return .response403
        case 404: return .response404
        case 405: return .response405
        case 416: return .response416
        case 420: return .response420
        case 481: return .response481
        case 483: return .response483
        case 501: return .response501
        case 503: return .response503
        case 505: return .response505
        case 603: return .response603
        case 607: return .response607
        case 608: return .response608
        default: return .responseOther
        }
    }
}

/// One worker's counters. Only the owning worker writes (relaxed atomic
/// stores, so no locked instructions on the hot path); the control thread
/// reads them for `lookupd stats`.
///
/// Threading: one writer thread (its worker), any number of readers.
public final class WorkerCounters: @unchecked Sendable {
    @usableFromInline let slots: UnsafeMutablePointer<UInt64>
    private static let count = Counter.allCases.count

    public init() {
        // Round up to whole cache lines so two workers never share one.
        let padded = (WorkerCounters.count + 7) & ~7
        slots = UnsafeMutablePointer<UInt64>.allocate(capacity: padded)
        slots.initialize(repeating: 0, count: padded)
    }

    deinit { slots.deallocate() }

    @inlinable
    public func add(_ counter: Counter, _ amount: UInt64 = 1) {
        lookupd_counter_add(slots + counter.rawValue, amount)
    }

    public func value(_ counter: Counter) -> UInt64 {
        lookupd_counter_load(slots + counter.rawValue)
    }
}
