// swift-tools-version:6.1
// libFuzzer targets for the code that reads untrusted bytes. Built and run by `Tests/Fuzz/run`,
// which passes `-sanitize=fuzzer,address` to every module. Each target's main hands its test
// function to libFuzzer's driver (FuzzerDriver), because SwiftPM gives every executable a main.
import PackageDescription

let keepAlive: Target.Dependency = .product(name: "KeepAlive", package: "keepalived")
let fuzzTarget: [Target.Dependency] = [keepAlive, "FuzzerDriver"]

let package = Package(
    name: "KeepAliveFuzz",
    dependencies: [.package(name: "keepalived", path: "../..")],
    targets: [
        .target(name: "FuzzerDriver"),
        .executableTarget(name: "FuzzWAV", dependencies: fuzzTarget),
        .executableTarget(name: "FuzzBase64Clip", dependencies: fuzzTarget),
        .executableTarget(name: "FuzzLevel", dependencies: fuzzTarget),
        // The daemon's own request reader, from its _KeepalivedControlProtocol library.
        .executableTarget(name: "FuzzControlRequest", dependencies: [
            .product(name: "_KeepalivedControlProtocol", package: "keepalived"), "FuzzerDriver",
        ]),
    ]
)
