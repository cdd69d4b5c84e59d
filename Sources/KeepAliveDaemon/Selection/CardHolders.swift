import Glibc

/// A process that has a card's playback device open now.
struct CardHolder: Sendable, Equatable, CustomStringConvertible {
    var pid: Int32
    var uid: UInt32
    var command: String

    /// Sound servers: a card such a process held stays its own while its device is closed (its
    /// sink suspended).
    static let servers: Set<String> = ["pulseaudio", "pipewire", "jackd", "jackdbus"]
    var isSoundServer: Bool { Self.servers.contains(command) }

    var description: String { "\(command) (pid \(pid), uid \(uid))" }
}

/// Who holds the cards' playback devices open, read from the kernel's `/proc/asound`: the one
/// look that also sees programs of other users, whose session bus and sound server keepalived
/// cannot reach (a system service beside a desktop user's PulseAudio).
///
/// ```swift
/// let holders = CardHolders.scan()    // [0: [pulseaudio (pid 812, uid 1000)]]
/// ```
enum CardHolders {
    /// Each card's holders, by card index, this process left out.
    static func scan(proc: String = "/proc") -> [Int: [CardHolder]] {
        var holders: [Int: [CardHolder]] = [:]
        let me = getpid()
        for (card, status) in substreamStatuses(in: proc + "/asound") {
            // owner_pid is the thread that opened it: its process is the thread's Tgid.
            guard let thread = ownerPID(status: status),
                  let process = tgid(status: readSmallFile("\(proc)/\(thread)/status") ?? ""), process != me else { continue }
            var info = stat()
            guard stat("\(proc)/\(process)", &info) == 0 else { continue }
            let command = (readSmallFile("\(proc)/\(process)/comm") ?? "?").trimmingTrailingNewline
            let holder = CardHolder(pid: process, uid: info.st_uid, command: command)
            if holders[card]?.contains(holder) != true { holders[card, default: []].append(holder) }
        }
        return holders
    }

    /// Who holds each card's playback devices, for `status`: `mpd (pid 812, uid 110) on card 0`,
    /// sorted by card. A process keepalived cannot see (the system service's `ProtectProc=invisible`
    /// hides other users' processes) is named by the thread that opened the device, which
    /// `/proc/asound` still shows: `thread 815 of a process hidden from keepalived on card 0`.
    static func descriptions(proc: String = "/proc") -> [String] {
        let me = getpid()
        var lines: [String] = []
        for (card, status) in substreamStatuses(in: proc + "/asound").sorted(by: { $0.0 < $1.0 }) {
            guard let thread = ownerPID(status: status) else { continue }
            let line: String
            if let process = tgid(status: readSmallFile("\(proc)/\(thread)/status") ?? "") {
                guard process != me else { continue }
                var info = stat()
                let uid = stat("\(proc)/\(process)", &info) == 0 ? ", uid \(info.st_uid)" : ""
                let command = (readSmallFile("\(proc)/\(process)/comm") ?? "?").trimmingTrailingNewline
                line = "\(command) (pid \(process)\(uid)) on card \(card)"
            } else {
                line = "thread \(thread) of a process hidden from keepalived on card \(card)"
            }
            if !lines.contains(line) { lines.append(line) }
        }
        return lines
    }

    /// `owner_pid   : 812` in a substream's status; nil when it is closed.
    static func ownerPID(status: String) -> Int32? {
        field("owner_pid", in: status)
    }

    /// `Tgid:\t812` in a thread's /proc status.
    static func tgid(status: String) -> Int32? {
        field("Tgid", in: status)
    }

    private static func field(_ name: String, in text: String) -> Int32? {
        for line in text.split(separator: "\n") where line.hasPrefix(name) {
            let value = line.dropFirst(name.count).drop { $0 == " " || $0 == "\t" || $0 == ":" }
            return Int32(value.prefix { $0.isNumber })
        }
        return nil
    }

    /// Every playback substream's status file (`card0/pcm3p/sub0/status`), with its card.
    private static func substreamStatuses(in asound: String) -> [(Int, String)] {
        var statuses: [(Int, String)] = []
        for card in entries(asound) where card.hasPrefix("card") {
            guard let index = Int(card.dropFirst(4)) else { continue }
            for pcm in entries("\(asound)/\(card)") where pcm.hasPrefix("pcm") && pcm.hasSuffix("p") {
                for sub in entries("\(asound)/\(card)/\(pcm)") where sub.hasPrefix("sub") {
                    if let status = readSmallFile("\(asound)/\(card)/\(pcm)/\(sub)/status") { statuses.append((index, status)) }
                }
            }
        }
        return statuses
    }

    private static func entries(_ directory: String) -> [String] {
        guard let stream = opendir(directory) else { return [] }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            names.append(withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) })
        }
        return names
    }
}

private extension String {
    var trimmingTrailingNewline: String {
        var text = self
        while text.last == "\n" { text.removeLast() }
        return text
    }
}
