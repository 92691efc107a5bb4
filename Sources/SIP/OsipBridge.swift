import COSIP

/// The only code that touches libosip2. Every osip object is created, used and freed inside one
/// call here; nothing osip-owned escapes, so the rest of the module deals in bytes only.
///
/// libosip2 is used as the judge of well-formedness (its grammar coverage is far wider than what
/// lookupd reads), not as the source of values: see WireParsing.swift for why.
enum OsipBridge {
    /// Must run exactly once before any parse (a parse without `parser_init` crashes).
    static func setUp() {
        // osip_trace() lazily initialises itself to print ERROR-level lines to stdout the first
        // time it is called without a sink; that both spams stdout for every malformed packet
        // and is a data race between workers. Installing a discarding sink with no level
        // enabled, before anything can trace, removes both.
        cosip_silence_trace()
        _ = parser_init()
    }

    static func acceptsVia(_ cString: UnsafePointer<CChar>) -> Bool {
        var via: UnsafeMutablePointer<osip_via_t>?
        guard osip_via_init(&via) == 0, let via else { return false }
        defer { osip_via_free(via) }
        return osip_via_parse(via, cString) == 0
    }

    static func acceptsCallID(_ cString: UnsafePointer<CChar>) -> Bool {
        var callID: UnsafeMutablePointer<osip_call_id_t>?
        guard osip_call_id_init(&callID) == 0, let callID else { return false }
        defer { osip_call_id_free(callID) }
        return osip_call_id_parse(callID, cString) == 0
    }

    static func acceptsCSeq(_ cString: UnsafePointer<CChar>) -> Bool {
        var cseq: UnsafeMutablePointer<osip_cseq_t>?
        guard osip_cseq_init(&cseq) == 0, let cseq else { return false }
        defer { osip_cseq_free(cseq) }
        return osip_cseq_parse(cseq, cString) == 0
    }

    static func acceptsURI(_ cString: UnsafePointer<CChar>) -> Bool {
        var uri: UnsafeMutablePointer<osip_uri_t>?
        guard osip_uri_init(&uri) == 0, let uri else { return false }
        defer { osip_uri_free(uri) }
        return osip_uri_parse(uri, cString) == 0
    }

    /// Validates a name-addr/addr-spec value (used for P-Asserted-Identity, which osip keeps as
    /// an opaque extension header).
    static func acceptsNameAddress(_ cString: UnsafePointer<CChar>) -> Bool {
        var from: UnsafeMutablePointer<osip_from_t>?
        guard osip_from_init(&from) == 0, let from else { return false }
        defer { osip_from_free(from) }
        return osip_from_parse(from, cString) == 0
    }
}

/// One-time process-wide libosip2 set-up.
///
/// Threading: `initialize()` may be called from any thread, any number of times; the set-up runs
/// once. `SIPParser.init` calls it, so explicit calls are only needed to control when it happens.
public enum SIPLibrary {
    private static let ready: Bool = {
        OsipBridge.setUp()
        return true
    }()

    public static func initialize() {
        _ = ready
    }
}
