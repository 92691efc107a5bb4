// swift-tools-version:6.0
// lookupd: caller-ID lookup daemon for SIP telephony.
//
// Four rooms, data flowing one way (bytes -> SIP -> Screening -> SIP -> bytes):
//   Directory   numbers, the on-disk directory format, reader, writer, compiler
//   Screening   contacts, directory priority, decisions (pure logic, no I/O)
//   SIP         libosip2 confined here: bytes in, Swift values out; verdict in, bytes out
//   Daemon      sockets, workers, reload, signals, control socket
// plus TextFormats (CSV/JSON/vCard readers with line numbers), Configuration
// (lookupd.conf), the thin `lookupd` CLI and the `lookupd-bench` executable.
import PackageDescription

let package = Package(
    name: "lookupd",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "lookupd", targets: ["lookupd"]),
        .executable(name: "lookupd-bench", targets: ["lookupd-bench"]),
    ],
    targets: [
        .systemLibrary(
            name: "COSIP",
            path: "Sources/COSIP",
            pkgConfig: "libosip2",
            providers: [.apt(["libosip2-dev"])]
        ),
        .target(name: "CSupport"),
        .target(name: "TextFormats"),
        .target(name: "Directory", dependencies: ["TextFormats", "CSupport"]),
        .target(name: "Screening", dependencies: ["Directory", "TextFormats"]),
        .target(name: "SIP", dependencies: ["COSIP"]),
        .target(name: "Configuration", dependencies: ["Directory", "Screening"]),
        .target(name: "Daemon", dependencies: ["SIP", "Screening", "Directory", "Configuration", "CSupport"]),
        .executableTarget(name: "lookupd", dependencies: ["Directory", "Screening", "Configuration", "Daemon"]),
        .executableTarget(name: "lookupd-bench", dependencies: ["Directory", "Screening"]),
        .testTarget(name: "TextFormatsTests", dependencies: ["TextFormats"]),
        .testTarget(name: "DirectoryTests", dependencies: ["Directory", "TextFormats"]),
        .testTarget(name: "ScreeningTests", dependencies: ["Screening", "Directory", "Configuration"]),
        .testTarget(name: "SIPTests", dependencies: ["SIP"]),
        .testTarget(name: "DaemonTests", dependencies: ["Daemon", "SIP", "Screening", "Directory", "Configuration", "lookupd"]),
        .testTarget(name: "CLITests", dependencies: ["lookupd"]),
    ]
)
