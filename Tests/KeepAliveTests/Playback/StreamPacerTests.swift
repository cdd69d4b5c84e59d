import Testing
@testable import KeepAlive

/// Pacing from the device's own position: simulated devices whose clocks run fast, slow and not
/// at all, against the system clock.
@Suite("Stream pacer")
struct StreamPacerTests {
    /// A device playing `rate × speed` frames per second of system time, with `buffer` frames.
    struct SimulatedDevice {
        let buffer: Int
        let rate: Double
        let speed: Double
        var queued = 0
        var played = 0.0
        var underruns = 0

        mutating func advance(by seconds: Double) {
            let frames = seconds * rate * speed
            if Double(queued) < frames { underruns += 1 }
            let taken = min(Double(queued), frames)
            played += taken
            queued -= Int(taken.rounded(.up))
            queued = max(queued, 0)
        }

        var available: Int { buffer - queued }
    }

    /// Runs `seconds` of simulated time: sleeps until the pacer's next check, writes what it
    /// allows. Returns the device and the number of wakeups.
    func run(speed: Double, format: OutputFormat, seconds: Double) -> (SimulatedDevice, Int) {
        var device = SimulatedDevice(buffer: format.bufferFrames, rate: Double(format.sampleRate), speed: speed)
        let start = ContinuousClock.now
        var now = start
        var pacer = StreamPacer(format: format, at: now)
        var wakeups = 0
        while start.duration(to: now) < .seconds(seconds) {
            let writable = pacer.writable(available: device.available, at: now)
            if writable > 0 {
                let before = device.available
                device.queued += writable
                _ = pacer.wrote(writable, availableBefore: before, availableAfter: pacer.checksNextWrite ? device.available : nil)
            }
            let next = pacer.nextCheck(available: device.available, at: now)
            device.advance(by: now.duration(to: next).seconds)
            now = next
            wakeups += 1
        }
        return (device, wakeups)
    }

    let hardware = OutputFormat(sampleFormat: .s16, sampleRate: 48000, channels: 2, bufferFrames: 96000, periodFrames: 48000)
    let dmix = OutputFormat(sampleFormat: .s16, sampleRate: 48000, channels: 2, bufferFrames: 16384, periodFrames: 1024)

    @Test("no drift of either sign starves the device", arguments: [0.9, 0.99, 0.998, 1.0, 1.002, 1.005, 1.01, 1.05, 1.2])
    func drift(_ speed: Double) {
        for format in [hardware, dmix] {
            let (device, _) = run(speed: speed, format: format, seconds: 600)
            #expect(device.underruns == 0, "speed \(speed), buffer \(format.bufferFrames): \(device.underruns) underruns")
        }
    }

    @Test("on dmix it wakes about twice per buffer, not once per period")
    func dmixWakeups() {
        let (_, wakeups) = run(speed: 1, format: dmix, seconds: 60)
        let perSecond = Double(wakeups) / 60
        // 16384 frames at 48 kHz, written when half is free: about 5.9 a second (aplay: 47).
        #expect(perSecond > 5 && perSecond < 7, "\(perSecond) wakeups/s")
    }

    @Test("a sound server that frees room a period at a time, three periods a buffer: one wakeup per period, no underrun")
    func serverPeriods() {
        // ALSA's pulse plug-in at a 4 s buffer: three periods of 1.33 s (it allows no fewer).
        let sink = OutputFormat(sampleFormat: .s16, sampleRate: 44100, channels: 1, bufferFrames: 176_400, periodFrames: 58_800)
        var queued = sink.bufferFrames
        var pacer = StreamPacer(format: sink, at: .now)
        var now = ContinuousClock.now
        let start = now
        var (wakeups, underruns, consumedPeriods) = (0, 0, 0)
        while start.duration(to: now) < .seconds(120) {
            let writable = pacer.writable(available: sink.bufferFrames - queued, at: now)
            if writable > 0 {
                queued += writable
                _ = pacer.wrote(writable, availableBefore: sink.bufferFrames - queued + writable, availableAfter: nil)
            }
            let next = pacer.nextCheck(available: sink.bufferFrames - queued, at: now)
            // The server takes whole periods as their time comes.
            let due = Int(start.duration(to: next).seconds * 44100) / sink.periodFrames
            while consumedPeriods < due {
                if queued < sink.periodFrames { underruns += 1 }
                queued = max(queued - sink.periodFrames, 0)
                consumedPeriods += 1
            }
            now = next
            wakeups += 1
        }
        #expect(underruns == 0)
        // A period is 1.33 s: 0.75 wakeups a second, one write each (two periods, 0.375, left the
        // server nothing at a write that just missed a grant: pipeWirePulseGrants).
        #expect(abs(Double(wakeups) / 120 - 0.75) < 0.05, "\(wakeups) wakeups in 120 s")
    }

    /// pipewire-pulse 0.3.65 serving keepalived's 6 s sink stream (three periods of 2 s, `minreq`
    /// a period): each graph cycle takes a cycle's frames if that many are queued (else it plays
    /// silence: an underrun), and the server grants room only once a whole period is missing
    /// (`stream_pop_missing`), so up to a period it played is not room yet. The thread wakes up
    /// to `lateness` after the pacer's check is due. Returns underruns, writes, and the least
    /// the server held at a write (frames).
    func pipeWirePulse(lateness: Double, seconds: Double) -> (underruns: Int, writes: Int, leastQueued: Int) {
        let format = OutputFormat(sampleFormat: .s16, sampleRate: 48000, channels: 1, bufferFrames: 288_000, periodFrames: 96000)
        let rate = 48000.0, cycle = 2048
        let start = ContinuousClock.now
        var pacer = StreamPacer(format: format, at: start)
        // The server's queue, the room it granted and was not written yet (the client's room).
        var (queued, granted) = (0, format.bufferFrames)
        var (underruns, writes, leastQueued) = (0, 0, Int.max)
        var cycles = 0
        var random: UInt64 = 0x9E37_79B9_7F4A_7C15
        var wake = 0.0
        while wake < seconds {
            // The cycles before this wakeup.
            while Double(cycles * cycle) / rate <= wake {
                if cycles > 0 || queued > 0 {
                    if queued >= cycle { queued -= cycle } else { underruns += queued > 0 || writes > 0 ? 1 : 0 }
                    let missing = format.bufferFrames - granted - queued
                    if missing >= format.periodFrames { granted += missing }
                }
                cycles += 1
            }
            let now = start + .seconds(wake)
            let available = min(granted, format.bufferFrames)
            let writable = pacer.writable(available: available, at: now)
            if writable > 0 {
                if writes > 0 { leastQueued = min(leastQueued, queued) }
                queued += writable
                granted -= writable
                writes += 1
                _ = pacer.wrote(writable, availableBefore: available, availableAfter: pacer.checksNextWrite ? granted : nil)
            }
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let late = lateness * Double(random >> 11) / Double(1 << 53)
            wake = start.duration(to: pacer.nextCheck(available: min(granted, format.bufferFrames), at: now)).seconds + late
        }
        return (underruns, writes, leastQueued)
    }

    @Test("a sink on pipewire-pulse, which grants room a period at a time: more than a period stays queued at every write, late wakeups included", arguments: [0.0, 0.05, 0.5])
    func pipeWirePulseGrants(_ lateness: Double) {
        let (underruns, writes, leastQueued) = pipeWirePulse(lateness: lateness, seconds: 600)
        #expect(underruns == 0)
        // Written a period at a time (the buffer less two periods); a wakeup late past the next
        // grant writes both.
        #expect(writes > 250 && writes <= 302, "\(writes) writes in 600 s")
        // Two periods were the threshold: a look just before the second period's grant slept
        // another period, and the server held nothing at the write (an underrun, late).
        #expect(leastQueued > 96000 - Int(lateness * 48000) - 2 * 2048, "\(leastQueued) frames queued at a write")
    }

    @Test("on a 2 s hardware buffer it wakes about once a second")
    func hardwareWakeups() {
        let (_, wakeups) = run(speed: 1, format: hardware, seconds: 120)
        #expect(abs(Double(wakeups) / 120 - 1) < 0.1, "\(wakeups) wakeups in 120 s")
    }

    @Test("a device that swallows everything at once is found at the first write and held to the clock")
    func nonPacingDevice() {
        let start = ContinuousClock.now
        var pacer = StreamPacer(format: hardware, at: start)
        #expect(pacer.checksNextWrite)
        let writable = pacer.writable(available: 96000, at: start)
        #expect(writable == 96000)
        // null: all of it is free again right after the write.
        let found = pacer.wrote(writable, availableBefore: 96000, availableAfter: 96000)
        #expect(found)
        #expect(pacer.pacedByClock)
        #expect(pacer.writable(available: 96000, at: start + .milliseconds(10)) == 0, "one buffer ahead of the clock already")
        let due = pacer.nextCheck(available: 96000, at: start + .milliseconds(10))
        #expect(abs(start.duration(to: due).seconds - 1.002) < 0.01, "half a buffer of real time later")
        #expect(pacer.writable(available: 96000, at: due) >= 48000)
    }

    @Test("a real device or a sound server frees nothing between a write and the next look")
    func pacingDevice() {
        let start = ContinuousClock.now
        var pacer = StreamPacer(format: hardware, at: start)
        let found = pacer.wrote(96000, availableBefore: 96000, availableAfter: 12)
        #expect(!found)
        #expect(!pacer.pacedByClock)
    }

    @Test("a server that keeps a period and a graph cycle queued (pipewire-pulse), at a 0.3 s buffer: written a period at a time, never held back or stalled")
    func serverThatHoldsBack() {
        // keepalived's own stream at --buffer 0.3 on pipewire-pulse, measured: three periods of
        // 4800 frames; the server takes 2048-frame cycles only while more than a period and a
        // cycle stays queued, and stopped at 5856 queued (ALSA's room 8544 < the 9600 threshold
        // of two periods, held back since; one period is the threshold now).
        let format = OutputFormat(sampleFormat: .s16, sampleRate: 48000, channels: 1, bufferFrames: 14_400, periodFrames: 4800)
        let cycle = 2048
        let start = ContinuousClock.now
        var now = start
        var pacer = StreamPacer(format: format, at: now)
        var stalls = StallDetector(window: StallDetector.window(threshold: pacer.threshold, rate: 48000), at: now)
        #expect(pacer.threshold == 4800)
        var (queued, cycles, wakeups, stalled, heldBack) = (0, 0, 0, 0, 0)
        while start.duration(to: now) < .seconds(60) {
            let available = format.bufferFrames - queued
            stalls.observe(available: available, bufferFrames: format.bufferFrames, at: now)
            var writable = pacer.writable(available: available, at: now)
            let toppingUp = writable == 0 && available > 0 && stalls.holdsBack(at: now)
            if toppingUp {
                writable = pacer.heldBack(available: available)
                heldBack += 1
            }
            if writable > 0 {
                queued += writable
                _ = pacer.wrote(writable, availableBefore: available, availableAfter: nil)
                if toppingUp { stalls.toppedUp(availableAfter: format.bufferFrames - queued) } else {
                    stalls.wrote(availableAfter: format.bufferFrames - queued, at: now)
                }
            }
            if stalls.stalled(at: now) != nil {
                stalled += 1
                break
            }
            let next = min(pacer.nextCheck(available: format.bufferFrames - queued, at: now), now + stalls.remaining(at: now))
            let due = Int(start.duration(to: next).seconds * 48000) / cycle
            while cycles < due {
                if queued >= format.periodFrames + cycle { queued -= cycle }
                cycles += 1
            }
            now = next
            wakeups += 1
        }
        #expect(stalled == 0)
        #expect(heldBack == 0, "\(heldBack) hold-backs")
        #expect(pacer.threshold == 4800)
        // A period is 0.1 s: about 10 writes a second, and no more than twice that in wakeups.
        #expect(Double(wakeups) / 60 <= 20, "\(wakeups) wakeups in 60 s")
    }
}
