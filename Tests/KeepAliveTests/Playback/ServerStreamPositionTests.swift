import Testing
@testable import KeepAlive

/// The position ALSA reads from a sound server's stream: what the server frees moves it, what
/// is written does not, and it wraps at the buffer.
@Suite("Server stream position")
struct ServerStreamPositionTests {
    @Test("a new stream's whole buffer counts as one frame less, so ALSA never sees the ring wrap to where it was")
    func newStream() {
        var position = ServerStreamPosition(bufferFrames: 100)
        position.update(writable: 100)
        #expect(position.frames == 99)
        position.update(writable: 100)
        #expect(position.frames == 99, "nothing more was freed")
    }

    @Test("a write takes room without moving the position; what the server frees afterwards moves it")
    func writesAndFrees() {
        var position = ServerStreamPosition(bufferFrames: 100)
        position.update(writable: 60)
        #expect(position.frames == 60)
        position.wrote(40)
        position.update(writable: 20)
        #expect(position.frames == 60)
        position.update(writable: 50)
        #expect(position.frames == 90)
        position.update(writable: 70)
        #expect(position.frames == 10, "wrapped at the buffer")
    }

    @Test("the server granting less (a request taken back) never moves the position back")
    func neverBackwards() {
        var position = ServerStreamPosition(bufferFrames: 100)
        position.update(writable: 50)
        position.update(writable: 30)
        #expect(position.frames == 50)
        position.update(writable: 45)
        #expect(position.frames == 65)
    }

    /// alsa-lib's ioplug turns each new position into frames played, modulo the buffer; over a
    /// long run of a server that frees a period at a time and a writer that fills two at once,
    /// those must add up, after the first grant, to what the server played, and the one frame
    /// that grant held back (never a whole buffer) once the first write makes room for it.
    @Test("over hours of periods, the frames ALSA counts are the frames the server played")
    func longRun() {
        let buffer = 264_600, period = 88_200
        var position = ServerStreamPosition(bufferFrames: buffer)
        var queued = 0
        var writable = buffer
        position.update(writable: writable)
        var last = position.frames
        var counted = 0
        var played = 0
        for step in 0..<10_000 {
            // The server plays a period and asks for it.
            if queued >= period {
                queued -= period
                played += period
                writable += period
            }
            position.update(writable: writable)
            counted += (position.frames - last + buffer) % buffer
            last = position.frames
            // Every other step, the writer fills two periods when it can.
            if step % 2 == 0, writable >= 2 * period {
                queued += 2 * period
                writable -= 2 * period
                position.wrote(2 * period)
                position.update(writable: writable)
                counted += (position.frames - last + buffer) % buffer
                last = position.frames
            }
        }
        #expect(played > 100 * buffer)
        #expect(counted == played + 1)
    }
}
