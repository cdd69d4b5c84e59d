import Glibc

/// The sanitizer this test binary, and the keepalived built beside it, run under, if any.
///
/// `swift test --sanitize=address` or `--sanitize=thread` instruments every module, the daemon
/// included, and slows it about 2–5× (more with the suite running in parallel) or 5–15×. Those runs look for memory errors, leaks and data
/// races; the plain run keeps every time bound exact. So deadlines for waiting, and the bounds
/// that measure time or CPU, stretch by ``timeScale`` under a sanitizer, and nothing else does.
public enum Sanitizer: Sendable {
    case address, thread

    /// Found by the runtime's own entry point, which the sanitizers export from the executable.
    public static let active: Sanitizer? = {
        let everywhere = UnsafeMutableRawPointer(bitPattern: 0)  // RTLD_DEFAULT
        if dlsym(everywhere, "__tsan_init") != nil { return .thread }
        if dlsym(everywhere, "__asan_init") != nil { return .address }
        return nil
    }()

    /// How much longer a time bound may be under the active sanitizer, times ``emulationSlowdown``.
    public static var timeScale: Double {
        let sanitizer: Double =
            switch active {
            case .thread: 8
            case .address: 5
            case nil: 1
            }
        return sanitizer * emulationSlowdown
    }

    /// How much slower than the hardware an emulator runs this binary: `KEEPALIVED_TEST_SLOWDOWN`,
    /// which `scripts/test-arm64` sets for its run under qemu-user (an aarch64 binary translated
    /// instruction by instruction on an amd64 host), else 1. Bounds then test what they mean
    /// (a publish never waits on a reader) rather than the emulator's speed.
    public static let emulationSlowdown: Double = {
        guard let text = getenv("KEEPALIVED_TEST_SLOWDOWN"), let value = Double(String(cString: text)), value >= 1
        else { return 1 }
        return value
    }()
}

extension Duration {
    /// This bound, stretched by the active sanitizer's slowdown (unchanged without one).
    public var underSanitizer: Duration { self * Sanitizer.timeScale }
}
