import CKeepAliveSDBus
import KeepAlive
import Logging
import Glibc

/// The session bus's device reservations (`org.freedesktop.ReserveDevice1.Audio<N>`), the
/// protocol through which PulseAudio, PipeWire and JACK share ALSA cards: whoever owns a card's
/// name may open the card; others ask it to let go (`RequestRelease`), and it agrees only to a
/// higher priority.
///
/// keepalived asks for no card and yields every card: it reserves the cards it opens itself at
/// the lowest priority, so any server that starts later gets them (it closes them first, then
/// says yes, and keeps the server's sink awake instead), and ``reservedByOthers`` tells the
/// planner which cards another program holds, which a selection never opens.
///
/// Runs on the daemon's main thread: the bus's descriptor joins the main `poll` and
/// ``process(on:)`` handles what came; only ``reservedByOthers`` may be read from any thread.
/// Without a session bus (a system service) ``open(logger:)`` returns `nil`. A bus that goes away
/// (its daemon restarted) is closed after one warning and tried again (``ReconnectBackoff``);
/// meanwhile the cards last known to be others' stay theirs, and once back keepalived reserves
/// its cards again and reads who holds the others.
///
/// ```swift
/// if let reservations = DeviceReservations.open(logger: logger) {
///     reservations.onReleaseRequest = { card in closeOutputs(on: card) }
///     reservations.hold([0: "dmix:CARD=Intel,DEV=0"], on: runtime.mainLoop)
///     if reservations.process(on: runtime.mainLoop) { rescan() }   // after poll says the bus is readable
/// }
/// ```
///
/// Concurrency: its bus and the names it holds are the main loop's: connected on the main thread
/// before the loop claims its ``ThreadOwner``, then changed only by ``process(on:)`` (the bus's
/// callbacks, a release request, a reconnection) and ``hold(_:on:)``, which check that owner in
/// every build (`preconditionOwned`). The poll's accessors (`descriptor`, `events`,
/// `pollTimeout`) are read by the main loop between turns, unchecked. What the status and the
/// planner read from other threads (`others`) is behind ``Locked``: so `@unchecked Sendable`.
final class DeviceReservations: @unchecked Sendable {
    /// Below every other program's: PulseAudio asks with 0, WirePlumber with -20, JACK with more.
    static let priority = Int32.min
    static let namePrefix = "org.freedesktop.ReserveDevice1.Audio"
    static let pathPrefix = "/org/freedesktop/ReserveDevice1/Audio"
    /// How long a card given up on request stays another's while its new owner has not taken the
    /// name yet.
    static let handOver: Duration = .seconds(5)
    /// How long a call to another program's reservation may take.
    static let callTimeout: Duration = .seconds(1)

    let logger: Logger
    /// The connection; `nil` while the bus is away.
    private var bus: OpaquePointer?
    private var unique = ""
    private var matchSlot: OpaquePointer?
    private var backoff = ReconnectBackoff(connectedAt: monotonicNow())
    /// The reservations keepalived holds, by card.
    private var held: [Int: Held] = [:]
    /// Names whose owner changed since the last ``process(on:)``: their application is read then,
    /// outside the signal's callback.
    private var changedNames: [(card: Int, owner: String)] = []
    private var changed = false
    /// Cards whose reservation another program took since the last ``process(on:)``.
    private var taken: [Int] = []
    /// Cards another program holds (its application's name), and cards given up on request.
    private let others = Locked<Others>(Others())

    private struct Others {
        var owners: [Int: String] = [:]
        var handedOver: [Int: ContinuousClock.Instant] = [:]
    }

    /// One served reservation: its object's properties and its slot on the bus.
    private final class Held {
        let object: UnsafeMutablePointer<ka_reservation>
        let card: Int
        var slot: OpaquePointer?
        init(_ reservations: DeviceReservations, card: Int, pcm: String) {
            self.card = card
            object = .allocate(capacity: 1)
            object.initialize(to: ka_reservation(
                application_name: strdup("keepalived"), application_device_name: strdup(pcm), priority: DeviceReservations.priority,
                on_request: { userdata, priority in
                    guard let userdata else { return 0 }
                    let request = Unmanaged<Request>.fromOpaque(userdata).takeUnretainedValue()
                    return request.reservations?.releaseRequested(card: request.card, priority: priority) == true ? 1 : 0
                },
                userdata: Unmanaged.passRetained(Request(reservations, card: card)).toOpaque()))
        }
        deinit {
            sd_bus_slot_unref(slot)
            Unmanaged<Request>.fromOpaque(object.pointee.userdata).release()
            free(object.pointee.application_name)
            free(object.pointee.application_device_name)
            object.deallocate()
        }
    }

    /// Runs when a program asks for a card keepalived holds, on the main thread inside
    /// ``process(on:)``; the card's outputs must be closed when it returns.
    var onReleaseRequest: ((Int) -> Void)?

    /// Not connected: ``open(logger:)`` connects. A test's way to one without a session bus.
    init(logger: Logger) {
        self.logger = logger
    }

    deinit {
        disconnect()
    }

    /// Connects to the user's session bus, follows the reservations and reads who holds which
    /// card now; `nil`, after one debug line, without a session bus.
    static func open(logger: Logger) -> DeviceReservations? {
        let reservations = DeviceReservations(logger: logger)
        return reservations.connect() ? reservations : nil
    }

    /// Opens the bus, subscribes to the reservations' owner changes and reads their owners now;
    /// false after a debug line.
    private func connect() -> Bool {
        guard let bus = Bus.session.open(toFollow: "device reservations", logger: logger) else { return false }
        var name: UnsafePointer<CChar>?
        guard sd_bus_get_unique_name(bus, &name) >= 0, let name else {
            sd_bus_flush_close_unref(bus)
            return false
        }
        // A holder that does not answer must not hold the daemon up: its card counts as held.
        sd_bus_set_method_call_timeout(bus, UInt64(Self.callTimeout.microseconds))
        var slot: OpaquePointer?
        let matched = ka_bus_match_reservations(bus, &slot, { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            var name: UnsafePointer<CChar>?, old: UnsafePointer<CChar>?, new: UnsafePointer<CChar>?
            guard ka_bus_read_owner_change(message, &name, &old, &new) >= 0, let name, let new else { return 0 }
            Unmanaged<DeviceReservations>.fromOpaque(userdata).takeUnretainedValue()
                .ownerChanged(name: String(cString: name), owner: String(cString: new))
            return 0
        }, Unmanaged.passUnretained(self).toOpaque())
        guard matched >= 0 else {
            logger.debug("not following device reservations: cannot subscribe", metadata: ["error": "\(Errno(-matched))"])
            sd_bus_flush_close_unref(bus)
            return false
        }
        self.bus = bus
        unique = String(cString: name)
        matchSlot = slot
        readAll()
        return true
    }

    /// Lets go of the connection and of what was served on it: the slots before the bus.
    private func disconnect() {
        held.removeAll()
        retired.removeAll()
        matchSlot = matchSlot.flatMap { sd_bus_slot_unref($0) }
        bus = bus.flatMap { sd_bus_flush_close_unref($0) }
    }

    /// The card a reservation's bus name is for (`…Audio1` → 1): decimal digits only, as the
    /// protocol names cards (`Int` alone would take `…Audio-1` and `…Audio+1`, both valid bus names).
    static func card(ofName name: String) -> Int? {
        guard name.hasPrefix(namePrefix) else { return nil }
        let number = name.utf8.dropFirst(namePrefix.utf8.count)
        guard !number.isEmpty, number.count <= 9, number.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        return Int(String(decoding: number, as: UTF8.self))
    }

    // MARK: - The main loop

    /// -1 while the bus is away.
    var descriptor: Int32 { bus.map { sd_bus_get_fd($0) } ?? -1 }
    var events: Int16 { bus.map { Int16(truncatingIfNeeded: sd_bus_get_events($0)) } ?? 0 }

    /// How long `poll` may wait for the bus, in ms (0 while messages wait in its queue after a
    /// call); -1 for no limit.
    var pollTimeout: Int32 {
        guard let bus else { return backoff.due.map { monotonicPollTimeout(until: $0) } ?? -1 }
        // A card handed over that nobody took is offered again when the hand-over ends.
        let handOverEnds = others.withLock { $0.handedOver.values.min() }.map { ContinuousClock.now.duration(to: $0 + Self.handOver).pollTimeout }
        var deadline: UInt64 = 0
        guard sd_bus_get_timeout(bus, &deadline) >= 0, deadline != UInt64.max else { return handOverEnds ?? -1 }
        let call = monotonicPollTimeout(until: .microseconds(Int64(clamping: deadline)))
        return handOverEnds.map { min($0, call) } ?? call
    }

    /// Handles what the bus brought; true when another program took or let go of a card, or the
    /// bus went away or came back (the caller rescans, and reserves its cards again).
    func process(on mainLoop: ThreadOwner) -> Bool {
        mainLoop.preconditionOwned("DeviceReservations.process")
        guard let bus else { return reconnectIfDue() }
        while true {
            let result = sd_bus_process(bus, nil)
            if result < 0 {
                logger.warning("the session bus went away: device reservations are not followed until it is back", metadata: ["error": "\(Errno(-result))"])
                disconnect()
                taken.removeAll()
                changedNames.removeAll()
                changed = false
                backoff.lost(at: monotonicNow())
                return true
            }
            if result == 0 { break }
        }
        let now = ContinuousClock.now
        retired.removeAll { now - $0.since > Self.handOver }
        // A card given up on request that its asker never reserved: keepalived may take it
        // again (JACK that failed to start, say), without waiting for another card event.
        let unclaimed = others.withLock { others in
            let expired = others.handedOver.filter { now - $0.value >= Self.handOver }.keys
            for card in expired { others.handedOver.removeValue(forKey: card) }
            return !expired.isEmpty
        }
        if unclaimed { changed = true }
        let lost = taken
        taken.removeAll()
        for card in lost { onReleaseRequest?(card) }
        let names = changedNames
        changedNames.removeAll()
        for (card, owner) in names {
            if owner.isEmpty {
                others.withLock { _ = $0.owners.removeValue(forKey: card) }
            } else {
                let application = applicationName(card: card)
                others.withLock {
                    $0.owners[card] = application
                    $0.handedOver.removeValue(forKey: card)
                }
                logger.info("another program reserved a card", metadata: ["card": "\(card)", "program": "\(application)"])
            }
        }
        defer { changed = false }
        return changed
    }

    /// Cards another program holds now, with its name; a card keepalived gave up on request
    /// counts until its new owner takes it (at most ``handOver``).
    var reservedByOthers: [Int: String] {
        let now = ContinuousClock.now
        return others.withLock { others in
            var reserved = others.owners
            for (card, since) in others.handedOver where now - since < Self.handOver && reserved[card] == nil {
                reserved[card] = "a program that asked for it"
            }
            return reserved
        }
    }

    /// Reserves exactly `cards` (card → the PCM keepalived opens on it), at the lowest priority:
    /// the new ones are asked for, the others let go. A card another program holds is not asked
    /// for.
    func hold(_ cards: [Int: String], on mainLoop: ThreadOwner) {
        mainLoop.preconditionOwned("DeviceReservations.hold")
        guard let bus else { return }
        for card in held.keys where cards[card] == nil { release(card, on: bus) }
        let othersHold = reservedByOthers
        for (card, pcm) in cards where held[card] == nil && othersHold[card] == nil { reserve(card, pcm: pcm, on: bus) }
        // The releases leave now, before the caller closes the cards.
        sd_bus_flush(bus)
    }

    /// The cards keepalived holds now.
    var heldCards: Set<Int> { Set(held.keys) }

    // MARK: - Private

    /// Tries a bus that went away again when its wait is over; true once back: the runtime then
    /// reserves its cards again and rescans with the owners read now.
    private func reconnectIfDue() -> Bool {
        let now = monotonicNow()
        guard backoff.isDue(at: now) else { return false }
        guard connect() else {
            backoff.failed(at: now)
            return false
        }
        logger.notice("back on the session bus; following device reservations")
        backoff.connected(at: now)
        return true
    }

    private func reserve(_ card: Int, pcm: String, on bus: OpaquePointer) {
        // One object per path: a retired one for this card makes way.
        retired.removeAll { $0.entry.card == card }
        let entry = Held(self, card: card, pcm: pcm)
        let exported = ka_bus_export_reservation(bus, &entry.slot, "\(Self.pathPrefix)\(card)", entry.object)
        guard exported >= 0 else {
            logger.debug("cannot serve a card's reservation", metadata: ["card": "\(card)", "error": "\(Errno(-exported))"])
            return
        }
        let flags = UInt64(SD_BUS_NAME_ALLOW_REPLACEMENT)
        let requested = sd_bus_request_name(bus, "\(Self.namePrefix)\(card)", flags)
        if requested < 0 && requested != -EALREADY {
            // Another program took it since the last look: the next rescan leaves the card to it.
            logger.info("a card's reservation is another program's", metadata: ["card": "\(card)", "error": "\(Errno(-requested))"])
            changed = true
            return
        }
        held[card] = entry
        logger.debug("reserved a card at the lowest priority", metadata: ["card": "\(card)", "pcm": "\(pcm)"])
    }

    private func release(_ card: Int, on bus: OpaquePointer) {
        guard held[card] != nil else { return }
        retire(card)
        sd_bus_release_name_async(bus, nil, "\(Self.namePrefix)\(card)", nil, nil)
    }

    /// RequestRelease from another program; true once the card's outputs are closed.
    fileprivate func releaseRequested(card: Int, priority: Int32) -> Bool {
        guard priority > Self.priority else { return false }
        // Closed already, the name not let go yet (its release is on its way): nothing to close.
        // A no here would make the asker give up the card for good (PulseAudio does).
        guard held[card] != nil else { return true }
        logger.info("a program asked for a card keepalived holds: giving it up", metadata: ["card": "\(card)", "priority": "\(priority)"])
        others.withLock { $0.handedOver[card] = .now }
        onReleaseRequest?(card)
        // The object stays exported until this call has returned; the name goes now.
        retire(card)
        if let bus { sd_bus_release_name_async(bus, nil, "\(Self.namePrefix)\(card)", nil, nil) }
        changed = true
        return true
    }
    /// Reservations let go, whose objects still answer for a while: a program may have asked
    /// (RequestRelease) before the name's release reached the bus, and an object that is gone
    /// answers UnknownObject, which PulseAudio takes as a no and then leaves the card alone.
    private var retired: [(entry: Held, since: ContinuousClock.Instant)] = []

    private func retire(_ card: Int) {
        guard let entry = held.removeValue(forKey: card) else { return }
        retired.append((entry, .now))
    }

    private func ownerChanged(name: String, owner: String) {
        guard let card = Self.card(ofName: name) else { return }
        if owner == unique { return }
        if held[card] != nil, !owner.isEmpty {
            // Taken without asking (ALLOW_REPLACEMENT lets it, and PulseAudio does): the new
            // owner opens the card now, so it closes at once, not after a rescan's settling.
            logger.notice("a program took a card's reservation without asking: closing it", metadata: ["card": "\(card)"])
            retire(card)
            others.withLock { $0.handedOver[card] = .now }
            taken.append(card)
        }
        changedNames.append((card, owner))
        changed = true
    }

    /// Replaces the cards known to be others' with what the bus says now (all at once: the
    /// planner may be reading them).
    private func readAll() {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        guard let bus, ka_bus_list_names(bus, &names) >= 0, let names else { return }
        defer {
            var index = 0
            while let name = names[index] { free(name); index += 1 }
            free(names)
        }
        var owners: [Int: String] = [:]
        var index = 0
        while let name = names[index] {
            index += 1
            guard let card = Self.card(ofName: String(cString: name)) else { continue }
            var owner: UnsafeMutablePointer<CChar>?
            guard ka_bus_name_owner(bus, name, &owner) >= 0, let owner else { continue }
            defer { free(owner) }
            if String(cString: owner) == unique { continue }
            owners[card] = applicationName(card: card)
        }
        others.withLock { $0.owners = owners }
    }

    /// The holder's `ApplicationName` ("PulseAudio Sound Server"), or its bus name.
    private func applicationName(card: Int) -> String {
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var value: UnsafeMutablePointer<CChar>?
        let name = "\(Self.namePrefix)\(card)"
        guard let bus, sd_bus_get_property_string(bus, name, "\(Self.pathPrefix)\(card)", "org.freedesktop.ReserveDevice1", "ApplicationName", &error, &value) >= 0,
              let value else { return name }
        defer { free(value) }
        return String(cString: value)
    }

    /// What a reservation's callback reaches: weakly, so a held reservation never keeps the
    /// watcher alive.
    private final class Request {
        weak var reservations: DeviceReservations?
        let card: Int
        init(_ reservations: DeviceReservations, card: Int) {
            self.reservations = reservations
            self.card = card
        }
    }
}
