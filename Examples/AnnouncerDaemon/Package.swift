// swift-tools-version:6.1
import PackageDescription

// An example daemon that embeds KeepAlive next to a service of its own. It depends on the
// keepalived package by path, so it always builds against the checkout it sits in; a real daemon
// would use `.package(url: "https://github.com/your-org/keepalived.git", branch: "main")`.
let package = Package(
    name: "AnnouncerDaemon",
    dependencies: [
        .package(name: "keepalived", path: "../.."),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // Beside swift-system, whose C module is `CSystem`: KeepAlive's C shims carry the
        // project's prefix (CKeepAliveLinux, …), so a daemon can depend on both.
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
    ],
    targets: [
        .executableTarget(
            name: "AnnouncerDaemon",
            dependencies: [
                .product(name: "KeepAlive", package: "keepalived"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
    ]
)
