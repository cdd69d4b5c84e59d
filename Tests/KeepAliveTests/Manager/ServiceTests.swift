import Foundation
import Logging
import ServiceLifecycle
import TestSupport
import Testing
@testable import KeepAlive

/// `KeepAliveService` run the way an embedding daemon runs it: in a `ServiceGroup`, against
/// ALSA's `file` and `null` devices (which the engine paces to real time), with timings measured.
@Suite("KeepAliveService in a ServiceGroup", .serialized, .timeLimit(.minutes(3)))
struct ServiceTests {
    typealias Support = EmbeddingTestSupport

    /// The requirement a shutdown is held to: `keepalived stop` waits at most 2 s for the process
    /// to be gone, then SIGKILLs it (docs/usage.md), so a graceful shutdown must end well inside
    /// it. The margin: a quiet machine stops in 1-10 ms; 2 s (stretched under a sanitizer) is
    /// what a busy one may take for a single stop (612 ms seen under ASan beside two guests).
    /// How fast a stop is belongs to a benchmark, not here (CONTRIBUTING, "What a test may bound
    /// in time").
    static let stopBudget = Duration.seconds(2).underSanitizer

    @Test("plays into a file device, stops within the stop command's 2 s of graceful shutdown, the group returns")
    func gracefulShutdownStopsPlayback() async throws {
        var runs: [(stopped: Duration, returned: Duration)] = []
        for _ in 0..<3 {
            let run = try await playThenShutDown()
            runs.append(run)
            if run.stopped < Self.stopBudget, run.returned < Self.stopBudget { break }
        }
        #expect(runs.contains { $0.stopped < Self.stopBudget && $0.returned < Self.stopBudget },
                "stopped and returned after \(runs) from the shutdown request")
        print("[ServiceTests] graceful shutdown: stopped after \(runs.last!.stopped), group returned after \(runs.last!.returned) (run \(runs.count))")
    }

    /// One run of the service in a group until a graceful shutdown; checks everything but the
    /// timings, which it returns: the `.stopped` event's and the group's return from the request.
    private func playThenShutDown() async throws -> (stopped: Duration, returned: Duration) {
        let directory = try Support.temporaryDirectory("service")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let capture = directory + "/x.raw"
        let logs = LogRecorder()
        let keepAlive = try KeepAliveService(
            configuration: KeepAliveConfiguration(devices: ["file:'\(capture)',raw"]), logger: logs.logger)
        let events = EventRecorder(keepAlive.manager.events)
        let neighbour = NeighbourService()
        let group = ServiceGroup(services: [keepAlive, neighbour], logger: Logger.quiet)
        let running = Task { try await group.run() }

        try await waitUntil("the output to play") { keepAlive.manager.state == .playing }
        try await waitUntil("the neighbour to run") { neighbour.isRunning }
        try await Task.sleep(for: .milliseconds(300))  // the length of the scenario, not a wait for a state
        #expect(keepAlive.manager.isRunning)
        #expect(keepAlive.manager.outputs[0].framesPlayed > 0)

        let shutdownAt = ContinuousClock.now
        await group.triggerGracefulShutdown()
        try await running.value
        let groupReturnedIn = shutdownAt.duration(to: .now)

        // Stopped: the manager says so, the `.stopped` event came within the stop budget, and the stream
        // was dropped (nothing more reaches the file).
        #expect(keepAlive.manager.state == .stopped)
        #expect(!keepAlive.manager.isRunning)
        try await waitUntil("the stopped event", timeout: Self.stopBudget) { events.firstInstant { $0 == .stopped } != nil }
        let stoppedAt = try #require(events.firstInstant { $0 == .stopped })
        let stoppedIn = shutdownAt.duration(to: stoppedAt)
        #expect(neighbour.returned)

        let frames = keepAlive.manager.outputs[0].framesPlayed
        #expect(frames > 0)
        let size = try Support.fileSize(capture)  // ALSA's file plug-in writes as the stream goes and on close
        #expect(size > 0)
        #expect(size == frames * 2, "\(size) bytes for \(frames) mono 16-bit frames")
        try await Task.sleep(for: .milliseconds(150))
        #expect(try Support.fileSize(capture) == size, "the file grew after the stream was dropped")
        let samples = try Support.int16Samples(capture)
        #expect(samples.allSatisfy { $0 == -1 }, "found \(Set(samples).sorted().prefix(5))")

        #expect(events.events.first == .started)
        #expect(events.events.contains(.stateChanged(device: "file:'\(capture)',raw", state: .playing)))
        #expect(events.events.last == .stopped)
        #expect(logs.messages.contains("playing"))
        return (stoppedIn, groupReturnedIn)
    }

    @Test("task cancellation stops playback and run() returns without throwing")
    func cancellationStopsPlayback() async throws {
        let keepAlive = try KeepAliveService(configuration: KeepAliveConfiguration(devices: ["null"]), logger: Logger.quiet)
        // Outside a group there is no graceful shutdown: only cancellation ends run().
        let running = Task { try await keepAlive.run() }
        try await waitUntil("the output to play") { keepAlive.manager.state == .playing }
        let cancelledAt = ContinuousClock.now
        running.cancel()
        try await running.value
        let returnedIn = cancelledAt.duration(to: .now)
        #expect(!keepAlive.manager.isRunning)
        #expect(returnedIn < Self.stopBudget, "run() returned \(returnedIn) after cancellation")
        print("[ServiceTests] cancellation: run() returned after \(returnedIn)")
    }

    @Test("cancelling the group's task stops playback and the group returns")
    func groupCancellation() async throws {
        let keepAlive = try KeepAliveService(configuration: KeepAliveConfiguration(devices: ["null"]), logger: Logger.quiet)
        let group = ServiceGroup(services: [keepAlive, NeighbourService()], logger: Logger.quiet)
        let running = Task { try await group.run() }
        try await waitUntil("the output to play") { keepAlive.manager.state == .playing }
        let cancelledAt = ContinuousClock.now
        running.cancel()
        _ = try? await running.value  // the group may report the cancellation; it must return
        let returnedIn = cancelledAt.duration(to: .now)
        #expect(!keepAlive.manager.isRunning)
        #expect(returnedIn < Self.stopBudget, "the group returned \(returnedIn) after cancellation")
    }

    @Test("a task already cancelled returns at once and never plays")
    func alreadyCancelled() async throws {
        let keepAlive = try KeepAliveService(configuration: KeepAliveConfiguration(devices: ["null"]), logger: Logger.quiet)
        let events = EventRecorder(keepAlive.manager.events)
        let running = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await keepAlive.run()
        }
        try await running.value
        try await Task.sleep(for: .milliseconds(50))
        #expect(!keepAlive.manager.isRunning)
        #expect(events.events.isEmpty, "\(events.events)")
    }

    @Test("with the gate off it idles, says so once, and still returns on shutdown")
    func gateOff() async throws {
        let logs = LogRecorder()
        let keepAlive = try KeepAliveService(
            configuration: KeepAliveConfiguration(devices: ["null"]), isOn: false, logger: logs.logger)
        let group = ServiceGroup(services: [keepAlive], logger: Logger.quiet)
        let running = Task { try await group.run() }
        try await waitUntil("the notice") { logs.messages.contains { $0.contains("switched off") } }
        #expect(keepAlive.manager.state == .stopped)

        // Turning the gate on and starting by hand plays; shutdown still stops it.
        keepAlive.manager.isOn = true
        keepAlive.manager.start()
        try await waitUntil("the output to play") { keepAlive.manager.state == .playing }
        let shutdownAt = ContinuousClock.now
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(shutdownAt.duration(to: .now) < Self.stopBudget)
        #expect(!keepAlive.manager.isRunning)
        #expect(logs.messages.filter { $0.contains("switched off") }.count == 1)
    }

    @Test("a manager started before the group is adopted, not started twice, and stopped at shutdown")
    func adoptsRunningManager() async throws {
        let manager = try KeepAliveManager(configuration: KeepAliveConfiguration(devices: ["null"]), logger: Logger.quiet)
        let events = EventRecorder(manager.events)
        manager.start()
        try await waitUntil("the output to play") { manager.state == .playing }
        let group = ServiceGroup(services: [KeepAliveService(manager: manager)], logger: Logger.quiet)
        let running = Task { try await group.run() }
        try await Task.sleep(for: .milliseconds(100))
        #expect(manager.state == .playing)
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(!manager.isRunning)
        try await waitUntil("the stopped event") { events.events.last == .stopped }
        #expect(events.events.filter { $0 == .started }.count == 1, "\(events.events)")
    }

    @Test("a missing device is ridden out, never thrown; shutdown still returns within the stop budget")
    func missingDeviceIsNotAnError() async throws {
        var configuration = KeepAliveConfiguration(devices: ["hw:CARD=NoSuchCard,DEV=0"])
        configuration.defaults.retry = RetryPolicy(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(50))
        let keepAlive = try KeepAliveService(configuration: configuration, logger: Logger.quiet)
        let events = EventRecorder(keepAlive.manager.events)
        let group = ServiceGroup(services: [keepAlive], logger: Logger.quiet)
        let running = Task { try await group.run() }
        try await waitUntil("the output to wait") { keepAlive.manager.state == .waitingForDevice(.noDevice) }
        try await waitUntil("a few retries") { events.events.filter { $0.kind == .error }.count >= 3 }
        let shutdownAt = ContinuousClock.now
        await group.triggerGracefulShutdown()
        try await running.value  // does not throw
        #expect(shutdownAt.duration(to: .now) < Self.stopBudget)
        #expect(keepAlive.manager.state == .stopped)
    }

    @Test("an invalid configuration is a typed error from the initializer", arguments: [
        (KeepAliveConfiguration(devices: []), KeepAliveConfigurationError.noDevices),
        (KeepAliveConfiguration(devices: ["a", "a"]), .duplicateDevice("a")),
        (KeepAliveConfiguration(defaults: OutputConfiguration(volume: Level(uncheckedLinear: 0.5))), .volumeAboveCeiling(volume: Level(uncheckedLinear: 0.5), ceiling: .defaultCeiling)),
        (KeepAliveConfiguration(defaults: OutputConfiguration(retry: RetryPolicy(initialDelay: .zero))), .invalidRetryPolicy),
    ])
    func invalidConfiguration(_ configuration: KeepAliveConfiguration, _ error: KeepAliveConfigurationError) {
        #expect(throws: error) { try KeepAliveService(configuration: configuration, logger: Logger.quiet) }
    }

    @Test("no devices is refused: the service adds no outputs, so it would keep nothing awake")
    func selectionWithoutDevices() {
        let configuration = KeepAliveConfiguration(devices: [])
        #expect(throws: KeepAliveConfigurationError.noDevices) { try KeepAliveService(configuration: configuration, logger: Logger.quiet) }
        // The manager, which a caller's scanner reconfigures, still takes it.
        #expect(throws: Never.self) { try KeepAliveManager(configuration: configuration, logger: Logger.quiet) }
    }
}

/// A service of the embedding daemon's own, beside the keep-alive: runs until graceful shutdown.
final class NeighbourService: Service, Sendable {
    private let state = Locked((running: false, returned: false))
    var isRunning: Bool { state.withLock { $0.running } }
    var returned: Bool { state.withLock { $0.returned } }

    func run() async throws {
        state.withLock { $0.running = true }
        defer { state.withLock { $0.returned = true } }
        try? await gracefulShutdown()
    }
}

/// Collects every event of one subscription, with the instant it arrived.
final class EventRecorder: Sendable {
    private final class Log: Sendable {
        let entries = Locked<[(event: KeepAliveEvent, at: ContinuousClock.Instant)]>([])
    }

    private let log = Log()
    private let consumer: Task<Void, Never>

    init(_ stream: AsyncStream<KeepAliveEvent>) {
        let log = log
        consumer = Task {
            for await event in stream {
                let now = ContinuousClock.now
                log.entries.withLock { $0.append((event, now)) }
            }
        }
    }

    deinit { consumer.cancel() }

    var events: [KeepAliveEvent] { log.entries.withLock { $0.map(\.event) } }
    var count: Int { log.entries.withLock { $0.count } }

    func firstInstant(where match: (KeepAliveEvent) -> Bool) -> ContinuousClock.Instant? {
        log.entries.withLock { $0.first { match($0.event) }?.at }
    }
}

/// A swift-log handler that keeps the messages, to check what the library logged.
final class LogRecorder: Sendable {
    private let storage = Locked<[String]>([])
    var messages: [String] { storage.withLock { $0 } }

    var logger: Logger {
        Logger(label: "test") { _ in Handler(recorder: self) }
    }

    struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            recorder.storage.withLock { $0.append(event.message.description) }
        }
    }
}

enum EmbeddingTestSupport {
    static func temporaryDirectory(_ label: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("keepalive-\(label)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func fileSize(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
    }

    static func int16Samples(_ path: String) throws -> [Int16] {
        try FileContents.data(URL(fileURLWithPath: path)).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

}
