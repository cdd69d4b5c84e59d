// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "keepalived",
    products: [
        .library(name: "KeepAlive", targets: ["KeepAlive"]),
        .executable(name: "keepalived", targets: ["keepalived"]),
        // The daemon's control-socket wire format, a library of its own so that the fuzzer and
        // the tests exercise the shipped code. Not an API for embedders: the leading underscore
        // says so, as swift-nio's products that are not API do.
        .library(name: "_KeepalivedControlProtocol", targets: ["_KeepalivedControlProtocol"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    ],
    targets: [
        .target(
            name: "CALSA",
            linkerSettings: [.linkedLibrary("asound")]
        ),
        .target(
            name: "KeepAlive",
            dependencies: [
                "CALSA",
                "CKeepAliveLinux",
                "CKeepalivedCarry",
                "CKeepAlivePulse",
                "CKeepAlivePipeWire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(name: "_KeepalivedControlProtocol"),
        // The memory a player's `keepalived:` PCM shares with keepalived while keepalived carries
        // its audio (its layout and the lock-free reads and writes of it): compiled into the
        // library and into the ALSA plug-in alike (scripts/build-alsa-plugin).
        .target(name: "CKeepalivedCarry"),
        // The `keepalived` ALSA PCM plug-in (libasound_module_pcm_keepalived.so), which asks
        // keepalived to release a card before a player opens it. A target so that the tests
        // call its pure helpers; the shipped .so is not a product of this package but built by
        // scripts/build-alsa-plugin (cc -shared, -lasound): a SwiftPM dynamic library of this C
        // target still links through swiftc, which adds swiftrt.o, libswiftCore.so and a
        // RUNPATH into the toolchain, and alsa-lib would load the Swift runtime into every
        // player that opens the PCM.
        .target(
            name: "CKeepalivedPCM",
            dependencies: ["CKeepalivedCarry"],
            linkerSettings: [.linkedLibrary("asound")]
        ),
        // The Linux calls Swift's Glibc module hides behind _GNU_SOURCE (the engine names its
        // threads through it), and the one posix_spawn setup shared by `keepalived start` and the
        // tests' child processes.
        .target(name: "CKeepAliveLinux"),
        // The kernel's CEC framework (linux/cec.h): its ioctls on fixed-size structures, which
        // Swift cannot call (variadic ioctl, _IOWR request numbers), for --cec. No libcec.
        .target(name: "CKeepAliveLinuxCEC"),
        // libsystemd: sd-bus, through which the daemon follows logind (sleep, lock, idle), with
        // wrappers for its varargs calls; and sd-daemon's notify protocol (READY=1, WATCHDOG=1).
        .target(
            name: "CKeepAliveSDBus",
            linkerSettings: [.linkedLibrary("systemd")]
        ),
        // libpulse for --linger, the sound server's sinks and the streams into them, loaded with
        // dlopen only when asked for (never linked: a headless box needs no libpulse0). Its
        // headers come from libpulse-dev at build time.
        .target(name: "CKeepAlivePulse"),
        // libmosquitto for --mqtt (issue 61), loaded with dlopen only when asked for, as libpulse
        // is (never linked: the package suggests libmosquitto1). Its header comes from
        // libmosquitto-dev at build time.
        .target(name: "CKeepAliveMosquitto"),
        // One question to PipeWire in its own protocol (its clock's settings, which its pulse
        // server does not tell), libpipewire-0.3 loaded with dlopen when asked, never linked.
        // Its headers come from libpipewire-0.3-dev, through the links in CKeepAlivePipeWire/system to
        // their versioned directories: a pkg-config system library would link libpipewire into
        // every binary (an embedder's too), and an -I flag is an unsafe flag, which a package
        // used by URL may not have.
        .target(name: "CKeepAlivePipeWire", cSettings: [.headerSearchPath("system")]),
        // Everything the daemon decides and runs: its options and options file, the runtime loop,
        // the control socket, logind, --linger, the output scanner and the status reports. A
        // library of the package's own (not a product), so that its decisions are tested
        // without the binary.
        .target(
            name: "KeepAliveDaemon",
            dependencies: [
                "KeepAlive",
                "_KeepalivedControlProtocol",
                "CKeepAliveLinux",
                "CKeepAliveSDBus",
                "CKeepAlivePulse",
                "CKeepAliveMosquitto",
                "CALSA",
                "CKeepAliveLinuxCEC",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `@main` and the command types: what the shell sees.
        .executableTarget(
            name: "keepalived",
            dependencies: [
                "KeepAliveDaemon",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            linkerSettings: [
                // A release daemon is linked at a fixed address: a position-independent binary has
                // ~43,000 pointers relocated at every start, which turns 0.45 MB of its read-only
                // data into private memory. Libraries, stack and heap stay randomized. Sanitizer
                // builds (debug) keep PIE, which they need. BENCHMARKS.md has the measurement.
                .unsafeFlags(["-Xclang-linker", "-no-pie"], .when(platforms: [.linux], configuration: .release)),
            ]
        ),
        // What the test targets share: file reading that LeakSanitizer accepts, the time
        // bounds that stretch under a sanitizer, waiting for a state, a logger that drops all.
        .target(name: "TestSupport", dependencies: ["CKeepAliveLinux", .product(name: "Logging", package: "swift-log")], path: "Tests/TestSupport"),
        .testTarget(
            name: "KeepAliveTests",
            dependencies: [
                "KeepAlive",
                "CKeepalivedCarry",
                "_KeepalivedControlProtocol",
                "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "KeepAliveDaemonTests",
            dependencies: ["KeepAliveDaemon", "KeepAlive", "_KeepalivedControlProtocol", "TestSupport", "CKeepalivedPCM"]
        ),
        // The ALSA plug-in's pure helpers (its request line, its hw name, its reading of a
        // reply); the plug-in itself, loaded by alsa-lib, is IntegrationTests' ALSAPluginTests.
        .testTarget(
            name: "KeepalivedPCMTests",
            dependencies: ["CKeepalivedPCM", "TestSupport"]
        ),
        // The doc comments' examples of the library's internals and of the daemon, generated by
        // scripts/doc-examples: compiled in every test build, never run. Warnings off: an example
        // shows a value by naming it (`device.pcm  // hw:CARD=0,DEV=3`).
        .testTarget(
            name: "InternalDocExamples",
            dependencies: ["KeepAliveDaemon", "KeepAlive", "_KeepalivedControlProtocol", "CKeepAlivePulse", .product(name: "Logging", package: "swift-log")],
            swiftSettings: [.unsafeFlags(["-suppress-warnings"])]
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["KeepAlive", "CKeepAliveLinux", "TestSupport", .product(name: "Logging", package: "swift-log")]
        ),
    ]
)
