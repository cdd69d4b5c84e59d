import CALSA
import Glibc

/// A player's stream, in the format its `keepalived:` PCM set (its hw_params).
package struct CarriedFormat: Sendable, Equatable, CustomStringConvertible {
    /// alsa-lib's number for the sample format (`snd_pcm_format_t`).
    package var alsaFormat: Int32
    package var rate: Int
    package var channels: Int
    package var bufferFrames: Int
    package var periodFrames: Int

    package init(alsaFormat: Int32, rate: Int, channels: Int, bufferFrames: Int, periodFrames: Int) {
        self.alsaFormat = alsaFormat
        self.rate = rate
        self.channels = channels
        self.bufferFrames = bufferFrames
        self.periodFrames = periodFrames
    }

    package var description: String {
        "\(SampleFormat(alsaFormat: snd_pcm_format_t(rawValue: alsaFormat)).map { "\($0)" } ?? "format \(alsaFormat)") \(rate) Hz \(channels) ch, buffer \(bufferFrames)"
    }

    /// The most a carried player's buffer may hold, in bytes, a bound on the memory a player
    /// makes keepalived map: a second at 384 kHz in 8 channels of 32 bits (12 MB) fits, and
    /// players ask for far less (0.5 to 2 s at 44.1 to 192 kHz stereo, at most 3 MB).
    package static let maximumBufferBytes = 16 << 20
}

/// A player whose audio an output carries on its own open stream: its connection to the control
/// socket (the player's PCM; its close ends the carrying) and what it said it is. Made by the
/// daemon's control server, which hands it to the output's playback thread (or refuses it);
/// from then on that thread alone reads the connection, answers it and closes it, and
/// ``owner`` checks the reads in every build.
package final class CarriedPlayer: @unchecked Sendable {
    /// The playback thread that carries the player, claimed when it takes it: the reads of the
    /// connection and the player's announcements are checked against it.
    let owner = ThreadOwner("a carried player's playback thread")
    /// The connection; non-blocking. Owned by whoever holds this object (one thread at a time).
    package let connection: Int32
    package let program: String
    package let pid: Int32
    /// Reads one `format` request line (the control protocol's JSON); nil when it is not one.
    let parseFormat: @Sendable ([UInt8]) -> CarriedFormat?
    /// Bytes of a request line read so far.
    private var pending: [UInt8] = []
    private var closed = false
    /// Whether the grant went out (a player kept across a reopen is not granted twice).
    var granted = false
    /// The memory of the format it set last: kept with it across a repair of the stream (its
    /// PCM still writes there), released with it (which tells its PCM the carrying ended).
    var memory: CarryMemory?

    /// Told whether the player's audio is sound now: at its first format (a player opens to
    /// play), when it falls silent or sounds again (``CarriedSoundStateMachine``), and, silent,
    /// when it is gone. From the playback thread; it must not wait.
    private let changed: @Sendable (_ sounding: Bool) -> Void
    private var sounding = false

    package init(connection: Int32, program: String, pid: Int32, parseFormat: @escaping @Sendable ([UInt8]) -> CarriedFormat?,
                 sounding changed: @escaping @Sendable (_ sounding: Bool) -> Void = { _ in }) {
        self.connection = connection
        self.program = program
        self.pid = pid
        self.parseFormat = parseFormat
        self.changed = changed
    }

    deinit {
        close()
        if sounding { changed(false) }
    }

    /// Whether its carried audio is sound now; told on only when it changes.
    func heard(sounding: Bool) {
        owner.preconditionOwned("CarriedPlayer.heard(sounding:)")
        guard sounding != self.sounding else { return }
        self.sounding = sounding
        changed(sounding)
    }

    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(connection)
    }

    /// What reading the connection found.
    enum Input: Equatable {
        case nothing
        case format(CarriedFormat)
        /// The player closed its PCM (or died), or sent what is not a request: carrying ends.
        case gone(String?)
    }

    /// Reads what the player sent, without blocking.
    func read() -> Input {
        owner.preconditionOwned("CarriedPlayer.read")
        var chunk = [UInt8](repeating: 0, count: 512)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count == 0 { return .gone(nil) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return .nothing }
                return .gone(nil)
            }
            pending.append(contentsOf: chunk[0..<count])
            if let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(pending[..<newline])
                pending.removeSubrange(...newline)
                guard let format = parseFormat(line) else { return .gone("the player's PCM sent a line that is not a format request") }
                return .format(format)
            }
            // A request is a short line: a longer one is not from the plug-in.
            if pending.count > 1024 { return .gone("the player's PCM sent more than 1 KB without a newline") }
        }
    }

    /// Sends a reply line, with descriptors attached. False when the player is gone.
    @discardableResult
    package func reply(_ line: String, descriptors: [Int32] = []) -> Bool {
        let bytes = Array((line + "\n").utf8)
        let sent = bytes.withUnsafeBytes { raw in
            descriptors.withUnsafeBufferPointer { csystem_send_with_descriptors(connection, raw.baseAddress, UInt(raw.count), $0.baseAddress, Int32($0.count)) }
        }
        // A reply is a few dozen bytes into an empty socket buffer: all or nothing.
        return sent == bytes.count
    }

    /// The grant: what the player's PCM may set, as one JSON line (numbers only).
    static func grant(_ capabilities: PCMCapabilities, maximumBufferBytes: Int) -> String {
        let formats = capabilities.formats.map(String.init).joined(separator: ",")
        let rates = capabilities.rates.map(String.init).joined(separator: ",")
        return #"{"ok":true,"carry":true,"formats":[\#(formats)],"rates":[\#(rates)],"channels":[\#(capabilities.channels.lowerBound),\#(capabilities.channels.upperBound)],"maxBufferBytes":\#(maximumBufferBytes)}"#
    }

    /// The answer to a player that finds another one carried on the device: as a second open of
    /// the hardware, "busy" (its PCM fails the open with EBUSY and asks for no release).
    static let busy = #"{"ok":false,"carry":false,"busy":true,"error":"keepalived carries another player on this device"}"#

    /// The reply to a format request keepalived cannot carry, as one JSON line.
    static func refusal(_ message: String) -> String {
        // Our own messages: kept to printable ASCII without quotes or backslashes.
        let safe = String(String.UnicodeScalarView(message.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F && $0 != "\"" && $0 != "\\" }))
        return #"{"ok":false,"carry":false,"error":"\#(safe)"}"#
    }
}

import CKeepAliveLinux
