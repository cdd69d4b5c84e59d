import ControlProtocol
import KeepAlive
import Logging
import ServiceLifecycle
import UnixSignals

/// Rereads the options and applies them to the running manager. Outputs whose device stays
/// keep playing; a bad options file is refused and the running configuration kept.
struct Reloader: Sendable {
    let manager: KeepAliveManager
    let logger: Logger
    let load: @Sendable () throws -> KeepAliveConfiguration

    func reload(trigger: String) -> ControlReply {
        let configuration: KeepAliveConfiguration
        do {
            configuration = try load()
        } catch {
            let message = (error as? CleanExit)?.description ?? "\(error)"
            logger.error("reload refused; keeping the running configuration", metadata: ["trigger": "\(trigger)", "error": "\(message)"])
            return .failure("reload refused: \(message)")
        }
        do {
            let outcome = try manager.reconfigure(configuration)
            logger.info("reloaded", metadata: ["trigger": "\(trigger)", "outcome": "\(outcome)"])
            return ControlReply(ok: true, changed: outcome != .unchanged)
        } catch {
            logger.error("reload refused; keeping the running configuration", metadata: ["trigger": "\(trigger)", "error": "\(error)"])
            return .failure("reload refused: \(error)")
        }
    }
}

/// `systemctl reload` sends SIGHUP: reread the options, as the control socket's `reload` does.
struct ReloadOnHangup: Service {
    let reloader: Reloader

    func run() async throws {
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        await withGracefulShutdownHandler {
            for await _ in hangups.cancelOnGracefulShutdown() {
                _ = reloader.reload(trigger: "SIGHUP")
            }
        } onGracefulShutdown: {}
    }
}
