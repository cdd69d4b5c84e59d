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

    @Test("reasons, errors, events, states and signals are structs (a kind or code to match, a description to print): the library grows them without breaking a program's switch")
    func growableReasonsAndErrors() {
        let values: [any Sendable] = [
            InterruptionReason.underrun, PauseReason.sleep, ClipError.emptyData, LevelError.notANumber(text: "x"),
            KeepAliveConfigurationError.noDevices, KeepAliveSignalError.unknownSignal("x"), PlayScheduleError.playOutOfRange(.zero),
            OutputExclusionError.empty, KeepAliveEvent.started, KeepAliveState.playing, KeepAliveSignal.clip,
        ]
        for value in values {
            #expect(Mirror(reflecting: value).displayStyle == .struct, "\(type(of: value)) is an enumeration again")
        }
        #expect(ClipError.emptyData.code == .emptyData && ClipError.emptyData.code != .zeroChannels)
        #expect(KeepAliveConfigurationError.duplicateDevice("a").code.description == "duplicateDevice")
        #expect(InterruptionReason.serverGone.description == "server-gone")
    }

    @Test("what was an enumeration's case is still made, compared and told apart as one: by its kind, its fields read from accessors")
    func wrappedEnumerationsKeepTheirCases() {
        let recovered = KeepAliveEvent.recovered(device: "pulse", reason: .serverGone, downtime: .milliseconds(1500))
        #expect(recovered.kind == .recovered && recovered.kind != .error)
        #expect(recovered.device == "pulse" && recovered.reason == .serverGone && recovered.downtime == .milliseconds(1500))
        #expect(recovered.state == nil && recovered.message == nil && recovered.pauseReason == nil && recovered.format == nil)
        #expect(recovered == .recovered(device: "pulse", reason: .serverGone, downtime: .milliseconds(1500)))
        #expect(recovered != .recovered(device: "pulse", reason: .underrun, downtime: .milliseconds(1500)))
        let changed = KeepAliveEvent.stateChanged(device: "hdmi", state: .waitingForDevice(.busy))
        #expect(changed.kind == .stateChanged && changed.state?.kind == .waitingForDevice && changed.state?.reason == .busy)
        let paused = KeepAliveEvent.paused(device: nil, reason: .locked)
        #expect(paused.device == nil && paused.pauseReason == .locked && paused.reason == nil)
        #expect(KeepAliveEvent.error(device: "d", reason: .busy, message: "m").message == "m")

        #expect(KeepAliveState.paused(.sleep).kind == .paused && KeepAliveState.paused(.sleep).name == "sleeping")
        #expect(KeepAliveState.recovering(.underrun).kind == .recovering && KeepAliveState.recovering(.underrun) != .waitingForDevice(.underrun))
        #expect(KeepAliveState.playing.kind == .playing && KeepAliveState.playing.reason == nil)

        #expect(KeepAliveSignal.sine(frequency: 20).kind == .sine && KeepAliveSignal.sine(frequency: 20) != .sine(frequency: 21))
        #expect(KeepAliveSignal.openOnly.kind == .openOnly && KeepAliveSignal.openOnly.kind.description == "openOnly")
        #expect(KeepAliveSignal.fluctuate(perSecond: 25).kind == .fluctuate && KeepAliveSignal.fluctuate(perSecond: 25).frequency == 25)
    }

    @Test("a configuration's signal or schedule error keeps the underlying error and its code, not only its words")
    func configurationErrorKeepsUnderlyingCode() {
        #expect(throws: KeepAliveConfigurationError.self) { try OutputConfiguration(signal: .sine(frequency: -1)).validate() }
        do {
            try OutputConfiguration(signal: .sine(frequency: -1)).validate()
        } catch {
            #expect(error.code == .signal)
            #expect(error.signalError?.code == .frequencyOutOfRange)
            #expect(error.signalError == .frequencyOutOfRange(signal: "sine", frequency: -1))
            #expect(error.description == KeepAliveSignalError.frequencyOutOfRange(signal: "sine", frequency: -1).description)
            #expect(error.scheduleError == nil)
        }
        do {
            try OutputConfiguration(schedule: PlaySchedule(playFor: .zero, pauseFor: .seconds(1))).validate()
        } catch {
            #expect(error.code == .schedule)
            #expect(error.scheduleError?.code == .playOutOfRange)
            #expect(error.signalError == nil)
        }
        #expect(KeepAliveConfigurationError.signal(.notAFrequency("x")) != .signal(.unknownSignal("x")))
    }

    /// alsa-lib's `snd_lib_error`, the handler in force, read through its symbol (Swift does not
    /// let a test read a C global that other threads may write).
    static func alsaErrorHandler() -> UnsafeRawPointer? {
        guard let library = dlopen("libasound.so.2", RTLD_NOW | RTLD_NOLOAD), let symbol = dlsym(library, "snd_lib_error") else { return nil }
        return symbol.load(as: UnsafeRawPointer?.self)
    }
}
