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
        .library(name: "Tunnel", targets: ["Tunnel"]),
        .library(name: "FarcastNIO", targets: ["FarcastNIO"]),
        .library(name: "Punktfunk", targets: ["Punktfunk"]),
        .library(name: "Jellyfin", targets: ["Jellyfin"]),
        .library(name: "Hosts", targets: ["Hosts"]),
        .library(name: "Viewer", targets: ["Viewer"]),
        .library(name: "WireGuard", targets: ["WireGuard"]),
        .library(name: "Desktop", targets: ["Desktop"]),
        .executable(name: "farcast", targets: ["farcast"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        // Jellyfin's live session dials with its WSClient (Sendspin runs its own WebSocketConnection).
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", .upToNextMinor(from: "1.6.2")),
        .package(url: "https://github.com/attaswift/BigInt.git", from: "6.0.1"),
        // Jellyfin: the generated client's runtime and transports (only the Jellyfin module uses them)
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession.git", from: "1.4.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // The Jellyfin stand-in server (an executable for tests and benchmarks, never a library product)
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird.git", from: "2.1.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        // Reaching hosts (the Hosts module only): SSH tunnels and the host book.
        .package(url: "https://github.com/apple/swift-nio-ssh.git", from: "0.15.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    ],
    targets: [
        // System libraries: a module map over one shim header each, nothing else.
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // ISA-L's inflate for RFB's zlib streams (Linux; Apple platforms keep zlib).
        .systemLibrary(name: "CISAL", pkgConfig: "libisal", providers: [.apt(["libisal-dev"])]),
        .systemLibrary(name: "CTurboJPEG", pkgConfig: "libturbojpeg", providers: [.apt(["libturbojpeg0-dev"])]),
        .systemLibrary(name: "COpus", pkgConfig: "opus", providers: [.apt(["libopus-dev"])]),
        .systemLibrary(name: "CFLAC", pkgConfig: "flac", providers: [.apt(["libflac-dev"])]),
        // ALSA for Sendspin's sound output, opened with dlopen on first use (CALSALoader), not
        // linked: no pkgConfig (it would add -lasound); its headers are in the default path.
        .systemLibrary(name: "CALSA", providers: [.apt(["libasound2-dev"])]),
        .target(name: "CALSALoader", dependencies: ["CLazyLibrary"]),
        // FFmpeg's libavcodec for punktfunk's video decoder, opened with dlopen when the first
        // decoder is made (CFFmpegLoader), not linked: no pkgConfig; its headers are in the default path.
        .systemLibrary(name: "CFFmpeg", providers: [.apt(["libavcodec-dev", "libavutil-dev"])]),
        .target(name: "CFFmpegLoader", dependencies: ["CLazyLibrary"]),
        // libcrypto's EVP AEADs for the punktfunk data plane and Sendspin's Noise transport, the SSH
        // packet ciphers and RFB's anonymous TLS (Linux; Apple platforms use CryptoKit).
        // On Linux opened with dlopen on first use (COpenSSLLoader), not linked: no pkgConfig (it
        // only added -lcrypto), the headers are in /usr/include.
        .systemLibrary(name: "COpenSSL", providers: [.apt(["libssl-dev"])]),
        .target(name: "COpenSSLLoader", dependencies: ["CLazyLibrary"]),
        // mDNS discovery through Avahi's dns_sd compatibility library (Apple platforms have dns_sd
        // built in). No pkgConfig: its .pc only adds -D_REENTRANT, which SwiftPM refuses with a
        // warning on every build; libavahi-compat-libdnssd-dev puts dns_sd.h in /usr/include.
        // On Linux it is opened with dlopen on first use (CDNSSDLoader), not linked.
        .systemLibrary(name: "CDNSSD", providers: [.apt(["libavahi-compat-libdnssd-dev"])]),
        .target(name: "CDNSSDLoader", dependencies: ["CLazyLibrary"]),
        // Linux UAPI headers for TUN/TAP, virtio-net and rtnetlink (ioctl numbers, struct sizes).
        .systemLibrary(name: "CTunnelLinux", providers: [.apt(["linux-libc-dev"])]),
        // QUIC for punktfunk/1: ngtcp2 0.12 with its GnuTLS crypto helper (TLS 1.3, client
        // certificates, our own pin check). Only the Punktfunk module uses it: on Linux opened with
        // dlopen on first use (CNGTCP2Loader), so no other command loads GnuTLS and its ten
        // libraries; elsewhere linked (Punktfunk's linker settings). No pkgConfig: its only
        // contribution was the -l flags, and the headers are in /usr/include.
        .systemLibrary(name: "CNGTCP2",
                       providers: [.apt(["libngtcp2-dev", "libngtcp2-crypto-gnutls-dev", "libgnutls28-dev"])]),
        .target(name: "CNGTCP2Loader", dependencies: ["CLazyLibrary"]),
        // Edwards25519 point arithmetic for SPAKE2 pairing (swift-crypto exposes no point addition).
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        // Windows, input and text for the Viewer module: SDL2 and SDL2_ttf. No pkgConfig: sdl2.pc
        // adds -D_REENTRANT, which SwiftPM refuses with a warning on every build.
        .systemLibrary(name: "CSDL2", providers: [.apt(["libsdl2-dev", "libsdl2-ttf-dev"])]),
        // ... loaded with dlopen when the first window opens, so that the commands that never
        // show one do not load SDL and the ~50 libraries it pulls in. The four loaders are C
        // generated from the installed headers by scripts/gen/lazy_loaders.py.
        .target(name: "CSDL2Loader", dependencies: ["CLazyLibrary"]),
        // What the four loaders share: opening their libraries and resolving the symbols, once.
        .target(name: "CLazyLibrary"),

        .target(
            name: "FarcastSupport",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The desktop's services over D-Bus, spoken directly (no libdbus): MPRIS media controls.
        .target(name: "Desktop"),
        // The audio codecs more than one protocol encodes with (Opus: the punktfunk microphone,
        // the Sendspin line-in).
        .target(name: "AudioCodecs", dependencies: ["COpus"]),
        // The one way to keep data in SQLite (GRDB, WAL, 0600, migrations one process at a time):
        // the host book and the Jellyfin offline index.
        .target(
            name: "FarcastStore",
            dependencies: [.product(name: "GRDB", package: "GRDB.swift")]
        ),
        // What the SwiftNIO-based modules share (network errors in words).
        .target(
            name: "FarcastNIO",
            dependencies: [
                "FarcastSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // One DNS-SD seam for every protocol (advertise, browse, resolve).
        .target(
            name: "Discovery",
            dependencies: [.target(name: "CDNSSD", condition: .when(platforms: [.linux])),
                           .target(name: "CDNSSDLoader", condition: .when(platforms: [.linux]))]
        ),
        .target(
            name: "RFB",
            dependencies: [
                "FarcastSupport", "FarcastNIO", "CZlib",
                .target(name: "CISAL", condition: .when(platforms: [.linux])),
                .target(name: "CTurboJPEG", condition: .when(platforms: [.linux])),
                // OpenSSL's libssl for anonymous TLS (VeNCrypt TLS* subtypes), which BoringSSL lacks.
                .target(name: "COpenSSL", condition: .when(platforms: [.linux])),
                .target(name: "COpenSSLLoader", condition: .when(platforms: [.linux])),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
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
                "FarcastSupport", "FarcastNIO", "Discovery", "AudioCodecs", "COpus", "CFLAC", .target(name: "CALSA", condition: .when(platforms: [.linux])),
                .target(name: "CALSALoader", condition: .when(platforms: [.linux])),
                // The Noise transport's AEAD with one keyed context (NoiseAEAD); swift-crypto elsewhere.
                .target(name: "COpenSSL", condition: .when(platforms: [.linux])),
                .target(name: "COpenSSLLoader", condition: .when(platforms: [.linux])),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "BigInt", package: "BigInt"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // TUN/TAP devices: create or adopt, rtnetlink configuration, batch I/O, GSO/GRO offload.
        // No package dependencies: an app embedding only the tunnel pays for nothing else.
        .target(
            name: "Tunnel",
            dependencies: [.target(name: "CTunnelLinux", condition: .when(platforms: [.linux]))]
        ),
        // punktfunk/1 game streaming: DataPlane/ (sealed datagrams, FEC, reassembly, input and feedback
        // planes: pure), Media/ (access units, audio), Session/ (QUIC, control, pairing).
        // The data plane's SIMD inner loops (GF(2^16) region multiply for the FEC): C, because
        // Swift has no portable byte shuffle. Not a system-library shim; no dependencies.
        .target(name: "PunktfunkKernels"),
        // The viewer's copy into the window surface with streaming stores (C: Swift has no
        // non-temporal store). No dependencies.
        .target(name: "ViewerKernels"),
        .target(
            name: "Punktfunk",
            dependencies: [
                "FarcastSupport", "AudioCodecs", "COpus", "PunktfunkKernels", "Discovery", "CNGTCP2", "CSodium",
                .target(name: "CNGTCP2Loader", condition: .when(platforms: [.linux])),
                .target(name: "CFFmpeg", condition: .when(platforms: [.linux])),
                .target(name: "CFFmpegLoader", condition: .when(platforms: [.linux])),
                .target(name: "COpenSSL", condition: .when(platforms: [.linux])),
                .target(name: "COpenSSLLoader", condition: .when(platforms: [.linux])),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            linkerSettings: ["ngtcp2", "ngtcp2_crypto_gnutls", "gnutls"].map {
                .linkedLibrary($0, .when(platforms: [.macOS, .iOS, .tvOS, .watchOS, .visionOS]))
            }
        ),
        // Reaching hosts: SSH/ (the local forwarder over swift-nio-ssh, OpenSSH keys, known_hosts,
        // ssh_config), Book/ (the host book in SQLite through GRDB), Secrets/ (SecretStore
        // backends), and the URL forms every protocol command accepts.
        .target(
            name: "Hosts",
            dependencies: [
                "FarcastSupport", "FarcastNIO", "FarcastStore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // OpenSSL's EVP AES-GCM for SSH packets, each decrypted once (see SSHPacketProtection.swift).
                .target(name: "COpenSSL", condition: .when(platforms: [.linux])),
                .target(name: "COpenSSLLoader", condition: .when(platforms: [.linux])),
                .product(name: "NIOSSH", package: "swift-nio-ssh"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The viewer window every protocol presents through (VNC now, punktfunk next): SDL2 on
        // Linux; its pure parts (scaling, key mapping, the staging buffer, the menu) everywhere.
        .target(
            name: "Viewer",
            dependencies: ["FarcastSupport", "ViewerKernels", .target(name: "CSDL2", condition: .when(platforms: [.linux])),
                           .target(name: "CSDL2Loader", condition: .when(platforms: [.linux]))]
        ),
        // WireGuard: the protocol core (BLAKE2s, the Noise IKpsk2 handshake, cookies, transport
        // sessions), pure and with time passed in; X25519 and ChaCha20-Poly1305 from swift-crypto.
        .target(
            name: "WireGuard",
            dependencies: ["FarcastSupport", "Tunnel", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // scripts/bench punktfunk-dataplane's driver (not a user command).
        .executableTarget(name: "punktfunk-bench", dependencies: ["Punktfunk"]),
        // Jellyfin: the generated layer (Generated/, package access) and the readable API above it.
        // The generated code, swift-openapi-runtime and async-http-client stay in this module.
        .target(
            name: "Jellyfin",
            dependencies: [
                "FarcastSupport", "FarcastNIO", "FarcastStore", "Discovery",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(platforms: [.linux])),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client", condition: .when(platforms: [.linux])),
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(platforms: [.linux])),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession", condition: .when(platforms: [.macOS, .iOS])),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The Jellyfin stand-in server for tests and benchmarks (scripts/jellyfin-standin): the
        // generated server stubs on Hummingbird over an in-memory library. Test support, so it
        // lives under Tests/ and is no library product.
        .executableTarget(
            name: "jellyfin-standin",
            dependencies: [
                "Jellyfin", "FarcastSupport",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/JellyfinStandIn",
            // The generated server stubs import at package level; every other import is internal.
            swiftSettings: [.enableUpcomingFeature("InternalImportsByDefault")]
        ),
        .executableTarget(
            name: "farcast",
            dependencies: [
                "FarcastSupport", "FarcastNIO", "RFB", "Sendspin", "Punktfunk", "Discovery", "Jellyfin", "Tunnel", "Hosts", "Viewer",
                "WireGuard", "Desktop", "AudioCodecs",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "FarcastSupportTests", dependencies: ["FarcastSupport"]),
        .testTarget(name: "FarcastNIOTests", dependencies: [
            "FarcastNIO", .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        .testTarget(name: "DiscoveryTests", dependencies: ["Discovery"]),
        .testTarget(name: "ViewerTests", dependencies: ["Viewer"]),
        .testTarget(name: "DesktopTests", dependencies: ["Desktop"]),
        .testTarget(name: "WireGuardTests", dependencies: ["WireGuard", "FarcastSupport", "Tunnel", .product(name: "Crypto", package: "swift-crypto")]),
        .testTarget(
            name: "TunnelTests",
            dependencies: ["Tunnel", .target(name: "CTunnelLinux", condition: .when(platforms: [.linux]))],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "JellyfinTests",
            dependencies: ["Jellyfin", "FarcastSupport", .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime")]
        ),
        .testTarget(
            name: "HostsTests",
            dependencies: ["Hosts", "FarcastSupport", .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "NIOSSH", package: "swift-nio-ssh"), .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "GRDB", package: "GRDB.swift")],
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
            dependencies: ["Sendspin", "AudioCodecs", "FarcastSupport", "FarcastNIO", "CFLAC", "COpus", .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
                           .product(name: "NIOWebSocket", package: "swift-nio")],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "PunktfunkTests",
            dependencies: ["Punktfunk", "PunktfunkKernels", "FarcastSupport", "COpus", .product(name: "Crypto", package: "swift-crypto")],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["FarcastSupport", "RFB", "Sendspin", "Punktfunk", "Jellyfin", "Tunnel", "Hosts", "Discovery", "WireGuard", "CZlib", "COpus",
                           .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "WSClient", package: "swift-websocket")],
            exclude: ["Fixtures"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
