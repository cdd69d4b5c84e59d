import Glibc
import Logging
import TestSupport
import Testing
@testable import KeepAlive

/// A library changes no process-wide setting behind its caller's back.
@Suite("Library hygiene", .serialized)
struct LibraryHygieneTests {
    @Test("opening, failing and scanning devices leaves alsa-lib's error handler as the application set it")
    func alsaErrorHandlerUntouched() async throws {
        let before = Self.alsaErrorHandler()
        _ = ALSADevice.playbackDevices()
        var configuration = KeepAliveConfiguration(devices: ["keepalive_no_such_pcm"])
        configuration.defaults.retry = RetryPolicy(initialDelay: .milliseconds(5), maximumDelay: .milliseconds(10))
        let manager = try KeepAliveManager(configuration: configuration, logger: Logger(label: "test"))
        manager.start()
        _ = try? await waitUntil("the open to fail") { manager.outputs.first?.lastError != nil }
        manager.stop()
        #expect(manager.outputs.first?.lastError != nil, "the open was tried and failed")
        #expect(Self.alsaErrorHandler() == before)
        #expect(before != nil)
    }

    @Test("reasons and errors are structs (a code to match, a description to print): the library grows them without breaking a program's switch")
    func growableReasonsAndErrors() {
        let values: [any Sendable] = [
            InterruptionReason.underrun, PauseReason.sleep, ClipError.emptyData, LevelError.notANumber(text: "x"),
            KeepAliveConfigurationError.noDevices, KeepAliveSignalError.unknownSignal("x"), PlayScheduleError.playOutOfRange(.zero),
            OutputExclusionError.empty,
        ]
        for value in values {
            #expect(Mirror(reflecting: value).displayStyle == .struct, "\(type(of: value)) is an enumeration again")
        }
        #expect(ClipError.emptyData.code == .emptyData && ClipError.emptyData.code != .zeroChannels)
        #expect(KeepAliveConfigurationError.duplicateDevice("a").code.description == "duplicateDevice")
        #expect(InterruptionReason.serverGone.description == "server-gone")
    }

    /// alsa-lib's `snd_lib_error`, the handler in force, read through its symbol (Swift does not
    /// let a test read a C global that other threads may write).
    static func alsaErrorHandler() -> UnsafeRawPointer? {
        guard let library = dlopen("libasound.so.2", RTLD_NOW | RTLD_NOLOAD), let symbol = dlsym(library, "snd_lib_error") else { return nil }
        return symbol.load(as: UnsafeRawPointer?.self)
    }
}
