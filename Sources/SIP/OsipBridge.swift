import COSIP
import CSIPLexer

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
        // Every osip allocation goes through the scratch arena (CSIPLexer/ScratchArena.c): inside
        // a `withScratch` scope it is carved from a per-thread buffer, elsewhere it is malloc.
        osip_set_allocators(lookupd_scratch_malloc, lookupd_scratch_realloc, lookupd_scratch_free)
        _ = parser_init()
    }

    /// Runs one osip parse with its allocations in the thread's scratch arena. When every
    /// allocation came from the arena the parsed object is dropped with it, without walking
    /// osip's free functions; otherwise (arena full) `free` releases it, which frees the
    /// malloc'd pieces and skips the arena ones.
    @inline(__always)
    private static func withScratch<T>(_ initialize: (UnsafeMutablePointer<UnsafeMutablePointer<T>?>) -> Int32,
                                       _ parse: (UnsafeMutablePointer<T>) -> Int32,
                                       _ free: (UnsafeMutablePointer<T>) -> Void) -> Bool {
        let mark = lookupd_scratch_begin()
        defer { lookupd_scratch_end() }
        var object: UnsafeMutablePointer<T>?
        guard initialize(&object) == 0, let object else { return false }
        let ok = parse(object) == 0
        if lookupd_scratch_clean(mark) == 0 { free(object) }
        return ok
    }

    static func acceptsVia(_ cString: UnsafePointer<CChar>) -> Bool {
        withScratch({ osip_via_init($0) }, { osip_via_parse($0, cString) }, { osip_via_free($0) })
    }

    static func acceptsCallID(_ cString: UnsafePointer<CChar>) -> Bool {
        withScratch({ osip_call_id_init($0) }, { osip_call_id_parse($0, cString) }, { osip_call_id_free($0) })
    }

    static func acceptsCSeq(_ cString: UnsafePointer<CChar>) -> Bool {
        withScratch({ osip_cseq_init($0) }, { osip_cseq_parse($0, cString) }, { osip_cseq_free($0) })
    }

    static func acceptsURI(_ cString: UnsafePointer<CChar>) -> Bool {
        withScratch({ osip_uri_init($0) }, { osip_uri_parse($0, cString) }, { osip_uri_free($0) })
    }

    /// Validates a name-addr/addr-spec value (used for P-Asserted-Identity, which osip keeps as
    /// an opaque extension header).
    static func acceptsNameAddress(_ cString: UnsafePointer<CChar>) -> Bool {
        withScratch({ osip_from_init($0) }, { osip_from_parse($0, cString) }, { osip_from_free($0) })
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
