// swift-tools-version:6.0
// lookupd: caller-ID lookup daemon for SIP telephony.
//
// Five rooms, data flowing one way (docs/ARCHITECTURE.md has the map, the import
// rules and the threading rules):
//   Directory   numbers, the on-disk directory format, reader, writer, compiler
//   Screening   contacts, directory priority, policies, time zones (pure logic, no I/O)
//   SIP         bytes in, Swift values out; answers out as bytes. libosip2 lives here,
//               as a validator of the header values SIP's own reader leaves to it
//   Answering   request and serving set in, action out: the answering policy of both
//               modes, compiled once per serving set; no socket, no thread
//   Daemon      sockets, workers, reload, signals, control socket: I/O only
//   Replication live changes to and from etcd (watch thread, replicated layers)
// on TextRules, TextFormats, Addresses, Identity (the caller identity SIP extracts and
// Screening reads), CPhoneNumbers (libphonenumber's data, read once), Configuration
// (lookupd.conf), Loading (what the configuration names, read at start-up and reload),
// SystemCalls (the one layer every file and socket call goes through); FeedRecords and
// Feeds (lookupd update), the thin `lookupd` CLI and the `lookupd-bench` executable.
import PackageDescription

let package = Package(
    name: "lookupd",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "lookupd", targets: ["lookupd"]),
        .executable(name: "lookupd-bench", targets: ["lookupd-bench"]),
        .executable(name: "lookupd-fuzz", targets: ["lookupd-fuzz"]),
        // Installed beside lookupd (or in ../lib/lookupd/): libphonenumber behind dlopen.
        .library(name: "lookupd-phonenumbers", type: .dynamic, targets: ["PhoneNumbersBridge"]),
    ],
    targets: [
        .systemLibrary(
            name: "COSIP",
            path: "Sources/COSIP",
            pkgConfig: "libosip2",
            providers: [.apt(["libosip2-dev"])]
        ),
        // SIP's C parts: the header-line scanner, the byte classes and osip's scratch arena.
        .target(name: "CSIPLexer"),
        // Compiler intrinsics (prefetch, relaxed counters), header-only.
        .target(name: "CIntrinsics"),
        // SIGBUS safety for directory files mapped straight from disk (docs/FORMAT.md).
        .target(name: "CMappingGuard"),
        // The system-call layer (docs/TESTING.md): every file and socket call goes through it,
        // with a typed Errno, EINTR retried in one place, writeFileAtomically, readRegularFile
        // and a fault-injection hook for tests. CSystemCalls holds the few Linux declarations
        // Swift's Glibc module hides.
        .target(name: "CSystemCalls"),
        .target(name: "SystemCalls", dependencies: ["CSystemCalls"]),
        // libphonenumber (Debian libphonenumber-dev): the numbering plans and the offline geocoder,
        // read through a small C API (docs/NUMBERING.md). CPhoneNumbers is what the executables
        // link: it opens PhoneNumbersBridge, the C++ half built as liblookupd-phonenumbers.so,
        // with dlopen only when a process needs the library's data (most commands read the
        // numbering cache instead, and none loads libphonenumber, protobuf, ICU, abseil).
        .target(name: "CPhoneNumbers"),
        .target(
            name: "PhoneNumbersBridge",
            linkerSettings: [
                .linkedLibrary("phonenumber"), .linkedLibrary("geocoding"), .linkedLibrary("protobuf"),
                .linkedLibrary("icuuc"), .linkedLibrary("icui18n"),
            ]
        ),
        // lookupd update (docs/FEEDS.md): Debian's libcurl, zlib, libzip and libcrypto.
        // libcurl (Debian libcurl4-openssl-dev): curl.h at build time, the library opened with
        // dlopen by the first process that downloads (lookupd update, etcd), not linked.
        .target(name: "CCurl"),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CZip", path: "Sources/CZip", pkgConfig: "libzip", providers: [.apt(["libzip-dev"])]),
        .systemLibrary(name: "CCrypto", path: "Sources/CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .target(name: "TextFormats", dependencies: ["TextRules"]),
        // What untrusted text may carry into a header, a log line or a page: strict UTF-8,
        // the label rules, the characters that must be escaped. Shared by Directory, SIP and
        // Daemon so they all apply the same rules.
        .target(name: "TextRules"),
        // Identity: the caller identity SIP extracts and Screening reads (one value, no parsing).
        .target(name: "Identity"),
        .target(name: "Directory", dependencies: ["TextFormats", "TextRules", "SystemCalls", "CIntrinsics", "CMappingGuard", "CPhoneNumbers", "Identity"]),
        .target(name: "Screening", dependencies: ["Directory", "TextFormats", "TextRules", "Identity"]),
        .target(name: "SIP", dependencies: ["COSIP", "CSIPLexer", "TextFormats", "TextRules", "Identity"]),
        // IP addresses, address blocks, listen and upstream addresses: values, no sockets.
        .target(name: "Addresses"),
        .target(name: "Configuration", dependencies: ["Addresses", "Directory", "Screening", "SystemCalls", "TextFormats", "TextRules"]),
        // What a configuration names, read into values: contacts, directories with their
        // journals, the time zone. Used at start-up and reload (and by the CLI), never per request.
        .target(name: "Loading", dependencies: ["Configuration", "Directory", "Screening", "SystemCalls", "TextFormats"]),
        // Request and serving set in, action out: the answering policy of both modes, with no
        // socket, no thread and no clock of its own (docs/ARCHITECTURE.md).
        .target(name: "Answering", dependencies: ["Addresses", "SIP", "Screening", "Directory", "Configuration", "TextFormats", "TextRules", "CIntrinsics", "Identity"]),
        .target(name: "Daemon", dependencies: ["Answering", "Addresses", "SIP", "Screening", "Directory", "Configuration", "Loading", "SystemCalls", "TextFormats", "TextRules", "CIntrinsics", "FeedRecords", "Replication", "Identity"]),
        // Replication (docs/CLUSTER.md): live changes through etcd's JSON gateway, with Debian's libcurl.
        .target(name: "Replication", dependencies: ["Configuration", "Directory", "Screening", "TextFormats", "TextRules", "SystemCalls", "CCurl"]),
        // FeedRecords: the feed record file format (STATE-DIRECTORY/feeds/NAME.state), read by
        // the daemon's stats too (no Foundation; files through SystemCalls).
        .target(name: "FeedRecords", dependencies: ["SystemCalls"]),
        .target(name: "Feeds", dependencies: ["FeedRecords", "Configuration", "Directory", "TextFormats", "TextRules", "SystemCalls", "CCurl", "CZlib", "CZip", "CCrypto"]),
        .executableTarget(name: "lookupd", dependencies: ["Addresses", "Directory", "Screening", "Configuration", "Loading", "Daemon", "Feeds", "FeedRecords", "SystemCalls", "TextFormats", "TextRules", "Replication", "SIP", "Identity"]),
        .executableTarget(name: "lookupd-bench", dependencies: ["Directory", "Screening"]),
        // Fuzzing (docs/TESTING.md): the targets are a library so the regression
        // tests replay saved inputs through the same code; scripts/fuzz builds
        // lookupd-fuzz with libFuzzer, any other build gets a replayer.
        .target(name: "CFuzzer"),
        .target(name: "FuzzTargets", dependencies: ["Addresses", "Answering", "Loading", "Directory", "Screening", "Configuration", "TextFormats", "TextRules", "SIP", "CFuzzer"]),
        .executableTarget(name: "lookupd-fuzz", dependencies: ["FuzzTargets", "CFuzzer"]),
        // What every test target shares (Tests/TestSupport): the seeded
        // generator, temporary folders, the built programs' locations, child
        // processes that die with the test process (CTestSupport spawns them),
        // SIP message builders, the feed server.
        .target(name: "CTestSupport", path: "Tests/CTestSupport"),
        .target(name: "TestSupport", dependencies: ["CTestSupport"], path: "Tests/TestSupport"),
        .testTarget(name: "SystemCallsTests", dependencies: ["SystemCalls", "TestSupport"]),
        .testTarget(name: "TextFormatsTests", dependencies: ["TextFormats", "TestSupport"]),
        .testTarget(name: "DirectoryTests", dependencies: ["Directory", "Screening", "TextFormats", "TextRules", "SystemCalls", "CPhoneNumbers", "TestSupport"]),
        .testTarget(name: "ScreeningTests", dependencies: ["Screening", "Directory", "Configuration", "Loading", "Addresses", "TextFormats", "Identity", "TestSupport"]),
        .testTarget(name: "SIPTests", dependencies: ["SIP", "CSIPLexer", "Identity", "TestSupport"]),
        .testTarget(name: "AnsweringTests", dependencies: ["Answering", "Loading", "Configuration", "Directory", "Screening", "SIP", "Addresses", "TestSupport"]),
        .testTarget(name: "DaemonTests", dependencies: ["Daemon", "SIP", "Screening", "Directory", "Configuration", "Loading", "Addresses", "lookupd", "TestSupport", "Replication"]),
        .testTarget(name: "CLITests", dependencies: ["lookupd", "Configuration", "Directory", "TestSupport"]),
        .testTarget(name: "FeedTests", dependencies: ["Feeds", "FeedRecords", "Configuration", "Directory", "TextFormats", "SystemCalls", "lookupd", "TestSupport"]),
        .testTarget(name: "FuzzRegressionTests", dependencies: ["FuzzTargets", "lookupd-fuzz", "TestSupport"]),
        .testTarget(name: "ReplicationTests", dependencies: ["Replication", "Directory", "Screening", "Configuration", "TextFormats", "TestSupport"]),
    ],
    cxxLanguageStandard: .cxx17
)
