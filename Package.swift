// swift-tools-version: 6.1
import PackageDescription

// Farcast: native Swift clients for self-hosted streams. One library product per protocol plus
// the `farcast` command. Dependencies come from the local package mirror at the versions it lists.
let package = Package(
    name: "Farcast",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "FarcastSupport", targets: ["FarcastSupport"]),
        .library(name: "RFB", targets: ["RFB"]),
        .library(name: "Sendspin", targets: ["Sendspin"]),
        .library(name: "Discovery", targets: ["Discovery"]),
        .library(name: "FarcastNIO", targets: ["FarcastNIO"]),
        .library(name: "Punktfunk", targets: ["Punktfunk"]),
        .library(name: "Hosts", targets: ["Hosts"]),
        .executable(name: "farcast", targets: ["farcast"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        // Minor-pinned: WebSocketListener and WebSocketDialer use WSCore's @_spi(WSInternal)
        // entry point, which may change in any minor release.
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", .upToNextMinor(from: "1.6.2")),
        .package(url: "https://github.com/attaswift/BigInt.git", from: "6.0.1"),
        // Reaching hosts (the Hosts module only): SSH tunnels and the host book.
        .package(url: "https://github.com/apple/swift-nio-ssh.git", from: "0.15.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    ],
    targets: [
        // System libraries: a module map over one shim header each, nothing else.
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CTurboJPEG", pkgConfig: "libturbojpeg", providers: [.apt(["libturbojpeg0-dev"])]),
        .systemLibrary(name: "COpus", pkgConfig: "opus", providers: [.apt(["libopus-dev"])]),
        .systemLibrary(name: "CFLAC", pkgConfig: "flac", providers: [.apt(["libflac-dev"])]),
        .systemLibrary(name: "CALSA", pkgConfig: "alsa", providers: [.apt(["libasound2-dev"])]),
        // libcrypto's EVP AEADs for the punktfunk data plane (Linux; Apple platforms use CryptoKit).
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // mDNS discovery through Avahi's dns_sd compatibility library (Apple platforms have dns_sd
        // built in). No pkgConfig: its .pc only adds -D_REENTRANT, which SwiftPM refuses with a
        // warning on every build; libavahi-compat-libdnssd-dev puts dns_sd.h in /usr/include.
        .systemLibrary(name: "CDNSSD", providers: [.apt(["libavahi-compat-libdnssd-dev"])]),
        // QUIC for punktfunk/1: ngtcp2 0.12 with its GnuTLS crypto helper (TLS 1.3, client
        // certificates, our own pin check). Only the Punktfunk module links it.
        .systemLibrary(name: "CNGTCP2", pkgConfig: "libngtcp2_crypto_gnutls",
                       providers: [.apt(["libngtcp2-dev", "libngtcp2-crypto-gnutls-dev", "libgnutls28-dev"])]),
        // Edwards25519 point arithmetic for SPAKE2 pairing (swift-crypto exposes no point addition).
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),

        .target(
            name: "FarcastSupport",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // What the SwiftNIO-based modules share (network errors in words).
        .target(
            name: "FarcastNIO",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // One DNS-SD seam for every protocol (advertise, browse, resolve).
        .target(
            name: "Discovery",
            dependencies: [.target(name: "CDNSSD", condition: .when(platforms: [.linux]))]
        ),
        .target(
            name: "RFB",
            dependencies: [
                "FarcastSupport", "FarcastNIO", "CZlib",
                .target(name: "CTurboJPEG", condition: .when(platforms: [.linux])),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "BigInt", package: "BigInt"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "Sendspin",
            dependencies: [
                "FarcastSupport", "FarcastNIO", "Discovery", "COpus", "CFLAC", .target(name: "CALSA", condition: .when(platforms: [.linux])),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "BigInt", package: "BigInt"),
                .product(name: "WSCore", package: "swift-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // punktfunk/1 game streaming: DataPlane/ (sealed datagrams, FEC, reassembly, input and feedback
        // planes: pure), Media/ (access units, audio), Session/ (QUIC, control, pairing).
        // The data plane's SIMD inner loops (GF(2^16) region multiply for the FEC): C, because
        // Swift has no portable byte shuffle. Not a system-library shim; no dependencies.
        .target(name: "PunktfunkKernels"),
        .target(
            name: "Punktfunk",
            dependencies: [
                "FarcastSupport", "COpus", "PunktfunkKernels", "Discovery", "CNGTCP2", "CSodium",
                .target(name: "COpenSSL", condition: .when(platforms: [.linux])),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Reaching hosts: SSH/ (the local forwarder over swift-nio-ssh, OpenSSH keys, known_hosts,
        // ssh_config), Book/ (the host book in SQLite through GRDB), Secrets/ (SecretStore
        // backends), and the URL forms every protocol command accepts.
        .target(
            name: "Hosts",
            dependencies: [
                "FarcastSupport", "FarcastNIO",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSH", package: "swift-nio-ssh"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // scripts/bench punktfunk-dataplane's driver (not a user command).
        .executableTarget(name: "punktfunk-bench", dependencies: ["Punktfunk"]),
        .executableTarget(
            name: "farcast",
            dependencies: [
                "FarcastSupport", "FarcastNIO", "RFB", "Sendspin", "Punktfunk", "Discovery", "Hosts",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "FarcastSupportTests", dependencies: ["FarcastSupport"]),
        .testTarget(name: "DiscoveryTests", dependencies: ["Discovery"]),
        .testTarget(
            name: "HostsTests",
            dependencies: ["Hosts", "FarcastSupport", .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "NIOSSH", package: "swift-nio-ssh"), .product(name: "GRDB", package: "GRDB.swift")],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "RFBTests",
            dependencies: ["RFB", "FarcastSupport", "CZlib", .target(name: "CTurboJPEG", condition: .when(platforms: [.linux])),
                           .product(name: "CryptoExtras", package: "swift-crypto"), .product(name: "BigInt", package: "BigInt")],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "SendspinTests",
            dependencies: ["Sendspin", "FarcastSupport", "CFLAC", "COpus", .product(name: "Crypto", package: "swift-crypto")],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "PunktfunkTests",
            dependencies: ["Punktfunk", "PunktfunkKernels", "FarcastSupport", "COpus", .product(name: "Crypto", package: "swift-crypto")],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["FarcastSupport", "RFB", "Sendspin", "Punktfunk", "Hosts", "Discovery", "CZlib", "COpus",
                           .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "WSClient", package: "swift-websocket")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
