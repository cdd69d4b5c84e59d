import CKeepAliveSDBus
import Logging

/// The D-Bus buses the daemon follows through sd-bus: logind on the system bus
/// (``LogindWatcher``), device reservations on the user's session bus (``DeviceReservations``).
enum Bus: String {
    case system, session

    /// A connection (at DBUS_SYSTEM_BUS_ADDRESS or DBUS_SESSION_BUS_ADDRESS when set, as the
    /// tests' private buses are); nil, after one debug line saying that `what` is not followed,
    /// when there is no such bus (containers and CI have no system bus, a system service no
    /// session bus).
    ///
    /// ```swift
    /// guard let bus = Bus.system.open(toFollow: "logind", logger: logger) else { return }   // not followed
    /// ```
    func open(toFollow what: String, logger: Logger) -> OpaquePointer? {
        var bus: OpaquePointer?
        let opened = switch self {
        case .system: sd_bus_open_system(&bus)
        case .session: sd_bus_open_user(&bus)
        }
        guard opened >= 0, let bus else {
            logger.debug("not following \(what): no \(rawValue) bus", metadata: ["error": "\(Errno(-opened))"])
            return nil
        }
        return bus
    }
}
