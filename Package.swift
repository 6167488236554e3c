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
        .executable(name: "farcast", targets: ["farcast"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        .target(
            name: "FarcastSupport",
            dependencies: [.product(name: "Logging", package: "swift-log")]
        ),
        .target(name: "RFB", dependencies: ["FarcastSupport"]),
        .target(name: "Sendspin", dependencies: ["FarcastSupport"]),
        .executableTarget(
            name: "farcast",
            dependencies: [
                "FarcastSupport", "RFB", "Sendspin",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "FarcastSupportTests", dependencies: ["FarcastSupport"]),
        .testTarget(name: "IntegrationTests", dependencies: ["FarcastSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
