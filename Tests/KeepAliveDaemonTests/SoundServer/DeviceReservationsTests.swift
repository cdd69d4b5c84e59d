import KeepAlive
import Logging
import Testing

@testable import KeepAliveDaemon

/// What of ``DeviceReservations`` needs no bus: which card a reservation's bus name is for. The
/// bus itself (a private dbus-daemon, PulseAudio taking a card) is DeviceReservationTests'.
@Suite("Device reservations: bus names")
struct DeviceReservationsTests {
    @Test("a reservation's name gives its card", arguments: [
        ("org.freedesktop.ReserveDevice1.Audio0", 0), ("org.freedesktop.ReserveDevice1.Audio1", 1),
        ("org.freedesktop.ReserveDevice1.Audio31", 31),
    ])
    func card(_ name: String, _ card: Int) {
        #expect(DeviceReservations.card(ofName: name) == card)
    }

    @Test("any other name, or a number the protocol never writes, is no card's", arguments: [
        "org.freedesktop.ReserveDevice1.Audio", "org.freedesktop.ReserveDevice1.Audio-1", "org.freedesktop.ReserveDevice1.Audio+1",
        "org.freedesktop.ReserveDevice1.Audio1x", "org.freedesktop.ReserveDevice1.Audio 1", "org.freedesktop.ReserveDevice1.Video0",
        "org.freedesktop.ReserveDevice1.Audio99999999999999999999", ":1.42", "",
    ])
    func notACard(_ name: String) {
        #expect(DeviceReservations.card(ofName: name) == nil)
    }

    @Test("the prefix and the object path name the same protocol")
    func names() {
        #expect(DeviceReservations.namePrefix + "0" == "org.freedesktop.ReserveDevice1.Audio0")
        #expect(DeviceReservations.pathPrefix + "0" == "/org/freedesktop/ReserveDevice1/Audio0")
        #expect(DeviceReservations.priority == Int32.min, "below every other program's: keepalived yields every card")
    }
}

/// ``DeviceReservations``' claim: its bus and the names it holds are the main loop's. Without a
/// bus (an unconnected one): the check comes before any use of it.
@Suite("Device reservations: the main loop's")
struct DeviceReservationsOwnerTests {
    @Test("held on the thread that claimed the main loop")
    func onTheMainLoop() {
        let reservations = DeviceReservations(logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        reservations.hold([0: "hw:0,0"], on: ThreadOwner.claimed("the test's thread"))
        #expect(reservations.heldCards.isEmpty, "no bus: nothing reserved")
    }

    @Test("processed or held off the main loop: the process stops, in every build")
    func offTheMainLoopStops() async {
        await #expect(processExitsWith: .failure) {
            let reservations = DeviceReservations(logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
            _ = reservations.process(on: ThreadOwner("the daemon's main loop"))
        }
        await #expect(processExitsWith: .failure) {
            let reservations = DeviceReservations(logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
            let mainLoop = ThreadOwner("the daemon's main loop")
            // Claimed by another thread.
            let other = try startThread(named: "owner-test") { mainLoop.claim() }
            other.join()
            reservations.hold([:], on: mainLoop)
        }
    }
}
