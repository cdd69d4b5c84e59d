import CKeepalivedPCM
import Glibc
import KeepAlive
import Logging
import TestSupport
import Testing

@testable import KeepAliveDaemon

/// The held open of `--power-on-wait`: when its gate opens, and which releases get one.
@Suite("Power-on wait: the gate and who is held")
struct PowerOnGateTests {
    static let logger = Logger.quiet

    static func readable(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 1
    }

    @Test("every wait the daemon announces lies inside the plug-in's bound, with a second to spare for the reply's way")
    func announcedWaitInsidePluginBound() {
        let announced = PowerOptions.longestPowerOnWait + ControlServer.holdMargin
        #expect(announced + .milliseconds(500) <= .milliseconds(Int(CKEEPALIVED_PCM_POWER_WAIT_MAX_MS)), "the daemon may announce \(announced)")
    }

    @Test("the descriptor is readable once the last run ended, and not again after it was read until another run ends")
    func acknowledged() throws {
        let gate = try PowerOnGate(deadline: .now + .seconds(30), settle: .zero)
        gate.addRun()
        #expect(!Self.readable(gate.descriptor))
        gate.runEnded(at: .now)
        #expect(Self.readable(gate.descriptor))
        gate.acknowledge()
        #expect(!Self.readable(gate.descriptor), "read: the control thread's poll must not wake again for it")
        gate.addRun()
        #expect(gate.opensAt == nil && !Self.readable(gate.descriptor))
        gate.runEnded(at: .now)
        #expect(Self.readable(gate.descriptor) && gate.opensAt != nil)
    }

    @Test("an output flapping while a slow hook runs: only its latest change waits, a hook is not run again for the state already set, and the last state wins")
    func flapping() throws {
        let directory = "/tmp/keepalived-flap-\(getpid())"
        mkdir(directory, 0o755)
        defer { _ = unlink("\(directory)/log"); rmdir(directory) }
        let script = "\(directory)/hook.sh"
        let text = "#!/bin/sh\necho \"$KEEPALIVED_EVENT $KEEPALIVED_PROGRAM\" >> \(directory)/log\nsleep 0.4\n"
        let file = fopen(script, "we")
        fputs(text, file)
        fclose(file)
        chmod(script, 0o755)
        defer { unlink(script) }
        var settings = BoxActivity.Settings()
        settings.idleAfter = .milliseconds(1)
        settings.onActive = try Hook(option: "--on-active", command: script)
        settings.onIdle = try Hook(option: "--on-idle", command: script)
        let activity = try BoxActivity(settings: settings, logger: Self.logger)
        func idleNow() {
            activity.loansChanged([:])
            usleep(5000)
            activity.timerFired(on: .claimed("the test's thread"))
        }
        // The first active runs (0.4 s); twenty flaps meanwhile, ending active.
        activity.loansChanged(["hw:0,0": Self.mpd])
        pollUntil(timeout: .seconds(10), every: .milliseconds(10)) {
            !((try? String(contentsOfFile: "\(directory)/log", encoding: .utf8)) ?? "").isEmpty
        }
        for round in 0..<20 {
            idleNow()
            activity.loansChanged(["hw:0,0": BoxActivity.Player(program: "player\(round)", card: 0, device: 0)])
        }
        activity.finishHooks()
        let log = (try? String(contentsOfFile: "\(directory)/log", encoding: .utf8)) ?? ""
        #expect(log == "active mpd\n", "already active when its turn came: not run again\n\(log)")
        // Then idle, flapping back to idle: one on-idle (with whichever player was last when it
        // was taken), and the idle it ends on is not run again.
        for round in 0..<5 {
            idleNow()
            activity.loansChanged(["hw:0,0": BoxActivity.Player(program: "late\(round)", card: 0, device: 0)])
        }
        idleNow()
        activity.finishHooks()
        let after = ((try? String(contentsOfFile: "\(directory)/log", encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(after.count == 2 && after.first == "active mpd" && after.last?.hasPrefix("idle ") == true, "\(after)")
    }

    @Test("the gate opens after the last run's end and the settle, at the latest at its deadline")
    func gate() throws {
        let start = ContinuousClock.now
        let gate = try PowerOnGate(deadline: start + .seconds(5), settle: .milliseconds(500))
        gate.addRun()
        gate.addRun()
        #expect(gate.opensAt == nil && !gate.isOpen(at: start + .seconds(1)) && gate.hooksOutlasted)
        gate.runEnded(at: start + .seconds(1))
        #expect(gate.opensAt == nil, "one run still going")
        #expect(!Self.readable(gate.descriptor))
        gate.runEnded(at: start + .seconds(2))
        #expect(Self.readable(gate.descriptor), "the last run's end wakes the waiting thread")
        #expect(gate.opensAt == start + .milliseconds(2500))
        #expect(!gate.isOpen(at: start + .milliseconds(2499)) && gate.isOpen(at: start + .milliseconds(2500)))
        #expect(!gate.hooksOutlasted)
        // A run that ends past the deadline: the deadline stands.
        let late = try PowerOnGate(deadline: start + .seconds(1), settle: .milliseconds(500))
        late.addRun()
        #expect(late.isOpen(at: start + .seconds(1)) && late.hooksOutlasted)
        late.runEnded(at: start + .milliseconds(900))
        #expect(late.opensAt == start + .seconds(1))
    }

    static func activity(wait: Duration?, hook: String = "true") throws -> BoxActivity {
        var settings = BoxActivity.Settings()
        settings.onActive = try Hook(option: "--on-active", command: hook)
        settings.powerOnWait = wait
        return try BoxActivity(settings: settings, logger: logger)
    }

    static let mpd = BoxActivity.Player(program: "mpd", card: 0, device: 0)

    @Test("a player at idle outputs is held with one gate for all of them while on-active runs; active until its loan takes over")
    func heldOnce() throws {
        let activity = try Self.activity(wait: .seconds(5), hook: "sleep 0.3")
        let outputs = ["hw:0,0", "plughw:0,0"]
        let gate = try #require(activity.holdForPower(outputs, player: Self.mpd))
        #expect(activity.report(for: "hw:0,0").state == "active" && activity.report(for: "plughw:0,0").program == "mpd",
                "active from the player's arrival: the hook switches the power on while keepalived still plays")
        #expect(activity.holdForPower(outputs, player: Self.mpd) === gate, "a second player meanwhile waits for the same power")
        #expect(activity.holdForPower(["plughw:0,0"], player: Self.mpd) === gate, "and at one of the same outputs too")
        activity.finishHooks()
        #expect(gate.isOpen(at: .now) && !gate.hooksOutlasted)
        // The release: the loan first, then the arrival ends; the outputs stay active.
        activity.loansChanged(["hw:0,0": Self.mpd, "plughw:0,0": Self.mpd])
        activity.playerArrived(outputs)
        #expect(activity.report(for: "hw:0,0").state == "active" && activity.report(for: "hw:0,0").idleInSeconds == nil)
        // The loan ends and comes back (the next track): still active, no hook, no hold.
        activity.loansChanged([:])
        #expect(activity.holdForPower(["hw:0,0"], player: Self.mpd) == nil)
    }

    @Test("a held player that gave up: its outputs fall silent and go idle after --on-idle-after")
    func gaveUp() throws {
        let activity = try Self.activity(wait: .seconds(5))
        _ = try #require(activity.holdForPower(["hw:0,0"], player: Self.mpd))
        activity.playerArrived(["hw:0,0"])
        let report = activity.report(for: "hw:0,0")
        #expect(report.state == "active" && report.idleInSeconds != nil, "quieting: \(report)")
        activity.finishHooks()
    }

    @Test("--cec without a hook: the first output of an idle box holds the player until the receiver's wake is confirmed, then --power-on-settle; a box already active does not (issue 58)")
    func heldForCEC() throws {
        var settings = BoxActivity.Settings()
        settings.powerOnWait = .seconds(5)
        settings.powerOnSettle = .milliseconds(300)
        settings.cecWakes = true
        let woken = Locked<[Bool]>([])
        let handed = Locked<[PowerOnGate]>([])
        let activity = try BoxActivity(settings: settings, logger: Self.logger, boxChanged: { active, gate in
            woken.withLock { $0.append(active) }
            if let gate { handed.withLock { $0.append(gate) } }
        })
        let gate = try #require(activity.holdForPower(["hw:0,0"], player: Self.mpd))
        #expect(woken.withLock { $0 } == [true], "the box became active at the player's arrival: the receiver is woken during the hold")
        #expect(handed.withLock { $0.count } == 1 && handed.withLock { $0.first } === gate, "--cec has the gate")
        // Until --cec says the wake is confirmed, nothing but the deadline opens it.
        #expect(gate.opensAt == nil && !gate.isOpen(at: .now))
        let confirmed = ContinuousClock.now
        gate.runEnded(at: confirmed)
        #expect(gate.opensAt == confirmed + .milliseconds(300) && !gate.hooksOutlasted)
        activity.loansChanged(["hw:0,0": Self.mpd])
        activity.playerArrived(["hw:0,0"])
        // Another card's player while the box is active: the receiver is on already.
        #expect(activity.holdForPower(["hw:1,0"], player: BoxActivity.Player(program: "squeezelite", card: 1, device: 0)) == nil)
        activity.finishHooks()
        // Nobody to hand it to (no --cec follower): the settle from now, as before.
        let alone = try BoxActivity(settings: settings, logger: Self.logger)
        let now = ContinuousClock.now
        let plain = try #require(alone.holdForPower(["hw:0,0"], player: Self.mpd))
        let opensAt = try #require(plain.opensAt)
        #expect(opensAt >= now + .milliseconds(300) && opensAt <= ContinuousClock.now + .milliseconds(300))
        alone.finishHooks()
    }

    @Test("no hold without --power-on-wait, without outputs, nor for a stream on a sink (nobody's open to hold)")
    func notHeld() throws {
        let plain = try Self.activity(wait: nil)
        #expect(plain.holdForPower(["hw:0,0"], player: Self.mpd) == nil)
        let held = try Self.activity(wait: .seconds(5))
        #expect(held.holdForPower([], player: Self.mpd) == nil)
        held.streamsChanged(["pulse": BoxActivity.Player(program: "paplay", sink: "tv")])
        #expect(held.holdForPower(["pulse"], player: Self.mpd) == nil, "the sink's stream made it active")
        held.finishHooks()
        plain.finishHooks()
    }

    @Test("an output's own --on-active (--output 'NAME --on-active …'): its player is held for it, another output's is not, and its own --on-idle-after times its silence")
    func outputsOwnHook() throws {
        var settings = BoxActivity.Settings()
        settings.powerOnWait = .seconds(5)
        settings.idleAfter = .seconds(300)
        settings.outputs["hw:1,0"] = BoxActivity.OutputHooks(onActive: try Hook(option: "--on-active", command: "true"), idleAfter: .seconds(2))
        #expect(settings.onActive(for: "hw:0,0") == nil && settings.onActive(for: "hw:1,0")?.arguments == ["true"])
        #expect(settings.idleAfter(for: "hw:0,0") == .seconds(300) && settings.idleAfter(for: "hw:1,0") == .seconds(2))
        let activity = try BoxActivity(settings: settings, logger: Self.logger)
        #expect(activity.holdForPower(["hw:0,0"], player: Self.mpd) == nil, "no hook for this output, no --cec: nothing to wait for")
        let dac = BoxActivity.Player(program: "squeezelite", card: 1, device: 0)
        let gate = try #require(activity.holdForPower(["hw:1,0"], player: dac))
        activity.finishHooks()
        #expect(gate.isOpen(at: .now))
        activity.loansChanged(["hw:1,0": dac])
        activity.playerArrived(["hw:1,0"])
        activity.loansChanged([:])
        let idleIn = try #require(activity.report(for: "hw:1,0").idleInSeconds)
        #expect(idleIn <= 2 && idleIn > 1, "its own 2 s, not the global 300: \(idleIn)")
        activity.finishHooks()
    }
}
